package identity

import (
	_ "embed" // Lua sources

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/claim_acquire.lua
	acquireSrc string
	//go:embed lua/claim_touch.lua
	touchSrc string
	//go:embed lua/claim_release.lua
	releaseSrc string
	//go:embed lua/claim_read.lua
	readSrc string
	//go:embed lua/conns_admit.lua
	admitSrc string

	// acquireScript claims a free name or renews the caller's own claim.
	acquireScript = redis.NewScript(acquireSrc)
	// touchScript is compare-and-pexpire.
	touchScript = redis.NewScript(touchSrc)
	// releaseScript is compare-and-delete.
	releaseScript = redis.NewScript(releaseSrc)
	// readScript returns the holder and its remaining TTL.
	readScript = redis.NewScript(readSrc)
	// admitScript drops ended leases and adds one under the cap.
	admitScript = redis.NewScript(admitSrc)
)
