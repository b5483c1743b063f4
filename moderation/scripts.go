package moderation

import (
	_ "embed" // Lua sources

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/mod_list.lua
	modListSrc    string
	modListScript = redisx.NewScript("moderation.mod_list", modListSrc)
)
