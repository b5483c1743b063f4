package lock

import (
	_ "embed" // Lua sources

	"github.com/chatd/chatd/internal/redisx"
)

var (
	//go:embed lua/lock_acquire.lua
	acquireSrc string
	//go:embed lua/lock_release.lua
	releaseSrc string
	//go:embed lua/lock_refresh.lua
	refreshSrc string
	//go:embed lua/lock_pttl.lua
	pttlSrc string
	//go:embed lua/fence_hset.lua
	fenceHSetSrc string
)

// FenceCheckLua is the fencing guard as Lua source, for a caller's own
// script that writes keys protected by a lock. It defines one local function:
//
//	fence_is_current(fence_key, fence) -> boolean
//
// true when the fence key (from [Client.Keys], passed in KEYS) still holds
// fence (the caller's [Lock.Fence], passed in ARGV as a decimal string), that
// is when nobody acquired the lock since. Prepend it to the script source:
//
//	var createRoom = redis.NewScript(lock.FenceCheckLua + createRoomSrc)
//
//	-- createRoomSrc: KEYS[1] fence key, KEYS[2..] keys of the same unit
//	if not fence_is_current(KEYS[1], ARGV[1]) then return -1 end
//	... writes ...
//
// Because the check and the writes run in one script, no newer holder can
// slip in between them. Do not modify this variable.
//
//go:embed lua/fence_check.lua
var FenceCheckLua string

var (
	acquireScript   = redisx.NewScript("lock.lock_acquire", acquireSrc)
	releaseScript   = redisx.NewScript("lock.lock_release", releaseSrc)
	refreshScript   = redisx.NewScript("lock.lock_refresh", refreshSrc)
	pttlScript      = redisx.NewScript("lock.lock_pttl", pttlSrc)
	fenceHSetScript = redisx.NewScript("lock.fence_hset", FenceCheckLua+fenceHSetSrc)
)
