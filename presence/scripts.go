package presence

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/presence_offline.lua
	offlineSrc    string
	offlineScript = redis.NewScript(offlineSrc)

	//go:embed lua/node_heartbeat.lua
	heartbeatSrc    string
	heartbeatScript = redis.NewScript(heartbeatSrc)

	//go:embed lua/nodes_list.lua
	nodesSrc    string
	nodesScript = redis.NewScript(nodesSrc)
)
