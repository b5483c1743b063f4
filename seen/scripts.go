package seen

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/seen_mark.lua
	markSrc string
	//go:embed lua/seen_check.lua
	checkSrc string

	// markScript sets the bits of items in the current generation, rotating
	// generations as they fill.
	markScript = redis.NewScript(markSrc)
	// checkScript tests items against every kept generation.
	checkScript = redis.NewScript(checkSrc)
)
