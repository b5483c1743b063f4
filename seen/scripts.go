package seen

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/seen_mark.lua
	markSrc string
	//go:embed lua/seen_check.lua
	checkSrc string

	// markScript sets the bits of items in the current generation, rotating
	// generations as they fill.
	markScript = redisx.NewScript("seen.seen_mark", markSrc)
	// checkScript tests items against every kept generation.
	checkScript = redisx.NewScript("seen.seen_check", checkSrc)
)
