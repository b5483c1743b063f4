package ratelimit

import (
	_ "embed"

	"github.com/chatd/chatd/internal/redisx"
)

//go:embed lua/bucket_take.lua
var bucketTakeSrc string

// takeScript refills a bucket and takes one token; see lua/bucket_take.lua.
var takeScript = redisx.NewScript("ratelimit.take", bucketTakeSrc)
