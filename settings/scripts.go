package settings

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

//go:embed lua/settings_write.lua
var writeSrc string

// writeScript sets or deletes one setting, INCRs the version and PUBLISHes
// the change; see lua/settings_write.lua.
var writeScript = redisx.NewScript("settings.settings_write", writeSrc)
