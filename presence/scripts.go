package presence

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/presence_offline.lua
	offlineSrc    string
	offlineScript = redisx.NewScript("presence.presence_offline", offlineSrc)

	//go:embed lua/node_heartbeat.lua
	heartbeatSrc    string
	heartbeatScript = redisx.NewScript("presence.node_heartbeat", heartbeatSrc)

	//go:embed lua/nodes_list.lua
	nodesSrc    string
	nodesScript = redisx.NewScript("presence.nodes_list", nodesSrc)
)
