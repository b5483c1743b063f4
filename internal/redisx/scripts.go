package redisx

import (
	"sync"

	"github.com/redis/go-redis/v9"
)

// scriptNames maps a script's SHA1 (hex, as EVALSHA sends it) to the name
// it was made with.
var scriptNames sync.Map // string → string

// NewScript returns the go-redis Script of src, named name: the Redis
// metrics (internal/redismetrics) count its EVALSHA and EVAL calls under
// name instead of under "evalsha", so that a dashboard shows which script
// is slow or failing. Name it after its package and Lua file
// ("rooms.message_send" for rooms/lua/message_send.lua). Two scripts of the
// same source share one SHA1, hence the first name.
//
// Call it where package-level script variables are made; the name is
// registered for the life of the process.
func NewScript(name, src string) *redis.Script {
	s := redis.NewScript(src)
	scriptNames.LoadOrStore(s.Hash(), name)
	return s
}

// ScriptName returns the name of the script whose SHA1 is sha, if it was
// made by NewScript.
func ScriptName(sha string) (string, bool) {
	v, ok := scriptNames.Load(sha)
	if !ok {
		return "", false
	}
	return v.(string), true
}
