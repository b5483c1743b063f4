package identity

import (
	_ "embed" // Lua sources

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/claim_acquire.lua
	acquireSrc string
	//go:embed lua/claim_admit.lua
	claimAdmitSrc string
	//go:embed lua/claim_release.lua
	releaseSrc string
	//go:embed lua/claim_restore.lua
	restoreSrc string
	//go:embed lua/revoked_add.lua
	revokeSrc string
	//go:embed lua/claim_read.lua
	readSrc string
	//go:embed lua/conns_admit.lua
	admitSrc string

	// acquireScript claims a free name or renews the caller's own claim,
	// refusing a revoked holder.
	acquireScript = redisx.NewScript("identity.acquire", acquireSrc)
	// claimAdmitScript renews a claim or takes a free name back, refusing a
	// revoked holder.
	claimAdmitScript = redisx.NewScript("identity.claim_admit", claimAdmitSrc)
	// releaseScript is compare-and-delete plus the revocation.
	releaseScript = redisx.NewScript("identity.release", releaseSrc)
	// restoreScript gives a free name back to the holder a node saw hold it.
	restoreScript = redisx.NewScript("identity.restore", restoreSrc)
	// revokeScript records a revocation again.
	revokeScript = redisx.NewScript("identity.revoke", revokeSrc)
	// readScript returns the holder and its remaining TTL.
	readScript = redisx.NewScript("identity.read", readSrc)
	// admitScript drops ended leases and adds one under the cap.
	admitScript = redisx.NewScript("identity.admit", admitSrc)
)
