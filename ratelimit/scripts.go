package ratelimit

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

//go:embed lua/bucket_take.lua
var bucketTakeSrc string

// takeScript refills a bucket and takes one token; see lua/bucket_take.lua
// and lua/bucket_lib.lua.
var takeScript = redisx.NewScript("ratelimit.take", BucketLua+bucketTakeSrc)

//go:embed lua/window_take.lua
var windowTakeSrc string

// windowScript logs one event in a sliding window if it has room; see
// lua/window_take.lua.
var windowScript = redisx.NewScript("ratelimit.window", windowTakeSrc)

// BucketLua defines the Lua function take_token(key, now, rate, burst[,
// slack]): a token bucket in one string key, "<tokens> <at ms>", expiring
// when it would be full again (SET NX GET, which writes a missing bucket
// less the token, and a SET PX when the bucket was there). The Limiter's script and every
// script that takes a token together with its own writes — a say, a direct
// message — prepend it; take_token returns 0 when it took one, else the ms
// until one is there. See lua/bucket_lib.lua.
//
//go:embed lua/bucket_lib.lua
var BucketLua string
