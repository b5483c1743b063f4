package ratelimit

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/bucket_take.lua
var bucketTakeSrc string

// takeScript refills a bucket and takes one token; see lua/bucket_take.lua.
var takeScript = redis.NewScript(bucketTakeSrc)
