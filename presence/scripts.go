package presence

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/presence_offline.lua
	offlineSrc    string
	offlineScript = redisx.NewScript("presence.presence_offline", offlineSrc)

	// nodesLib defines drop_dead, the registry's one way to drop dead
	// nodes, for the two scripts below.
	//go:embed lua/nodes_lib.lua
	nodesLib string

	//go:embed lua/node_heartbeat.lua
	heartbeatSrc    string
	heartbeatScript = redisx.NewScript("presence.node_heartbeat", nodesLib+heartbeatSrc)

	//go:embed lua/nodes_list.lua
	nodesSrc    string
	nodesScript = redisx.NewScript("presence.nodes_list", nodesLib+nodesSrc)
)
