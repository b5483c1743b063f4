package ratelimit

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

//go:embed lua/bucket_take.lua
var bucketTakeSrc string

// takeScript refills a bucket and takes one token; see lua/bucket_take.lua.
var takeScript = redisx.NewScript("ratelimit.take", bucketTakeSrc)

//go:embed lua/window_take.lua
var windowTakeSrc string

// windowScript logs one event in a sliding window if it has room; see
// lua/window_take.lua.
var windowScript = redisx.NewScript("ratelimit.window", windowTakeSrc)
