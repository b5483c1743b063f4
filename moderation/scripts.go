package moderation

import (
	_ "embed" // Lua sources

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/mod_list.lua
	modListSrc    string
	modListScript = redis.NewScript(modListSrc)
)
