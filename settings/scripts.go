package settings

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/settings_write.lua
var writeSrc string

// writeScript sets or deletes one setting, INCRs the version and PUBLISHes
// the change; see lua/settings_write.lua.
var writeScript = redis.NewScript(writeSrc)
