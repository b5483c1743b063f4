package rooms

import (
	_ "embed" // Lua sources
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/lock"
)

// The seat scripts share lua/lobby_lib.lua, prepended to each; room_create
// also gets the lock package's fence guard.
var (
	//go:embed lua/lobby_lib.lua
	lobbyLib string
	//go:embed lua/seat_claim.lua
	seatClaimSrc string
	//go:embed lua/room_create.lua
	roomCreateSrc string
	//go:embed lua/seat_release.lua
	seatReleaseSrc string
	//go:embed lua/seat_detach.lua
	seatDetachSrc string
	//go:embed lua/seat_renew.lua
	seatRenewSrc string
	//go:embed lua/lobby_sweep.lua
	lobbySweepSrc string
	//go:embed lua/lobby_rooms.lua
	lobbyRoomsSrc string
	//go:embed lua/message_send.lua
	messageSendSrc string
	//go:embed lua/lobbies_count.lua
	lobbiesCountSrc string
	//go:embed lua/lobbies_top.lua
	lobbiesTopSrc string
	//go:embed lua/read_mark.lua
	readMarkSrc string
	//go:embed lua/unread_count.lua
	unreadCountSrc string
)

var (
	seatClaimScript   = redis.NewScript(lobbyLib + seatClaimSrc)
	roomCreateScript  = redis.NewScript(lock.FenceCheckLua + lobbyLib + roomCreateSrc)
	seatReleaseScript = redis.NewScript(lobbyLib + seatReleaseSrc)
	seatDetachScript  = redis.NewScript(lobbyLib + seatDetachSrc)
	seatRenewScript   = redis.NewScript(lobbyLib + seatRenewSrc)
	lobbySweepScript  = redis.NewScript(lobbyLib + lobbySweepSrc)
	lobbyRoomsScript  = redis.NewScript(lobbyRoomsSrc)
	messageSendScript = redis.NewScript(messageSendSrc)

	lobbiesCountScript = redis.NewScript(lobbiesCountSrc)
	lobbiesTopScript   = redis.NewScript(lobbiesTopSrc)
	readMarkScript     = redis.NewScript(readMarkSrc)
	unreadCountScript  = redis.NewScript(unreadCountSrc)
)

// isNoScript reports whether err is Redis's NOSCRIPT reply to an EVALSHA of
// a script it does not hold (after a restart or SCRIPT FLUSH): the caller
// runs the script again with Script.Run, which falls back to EVAL.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
