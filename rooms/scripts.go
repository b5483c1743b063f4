package rooms

import (
	_ "embed" // Lua sources

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
	//go:embed lua/room_private.lua
	roomPrivateSrc string
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
	//go:embed lua/room_read.lua
	roomReadSrc string
	//go:embed lua/message_send.lua
	messageSendSrc string
	//go:embed lua/counter_add.lua
	counterAddSrc string
	//go:embed lua/lobbies_reserve.lua
	lobbiesReserveSrc string
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
	roomPrivateScript = redis.NewScript(lobbyLib + roomPrivateSrc)
	seatReleaseScript = redis.NewScript(lobbyLib + seatReleaseSrc)
	seatDetachScript  = redis.NewScript(lobbyLib + seatDetachSrc)
	seatRenewScript   = redis.NewScript(lobbyLib + seatRenewSrc)
	lobbySweepScript  = redis.NewScript(lobbyLib + lobbySweepSrc)
	lobbyRoomsScript  = redis.NewScript(lobbyRoomsSrc)
	roomReadScript    = redis.NewScript(roomReadSrc)
	messageSendScript = redis.NewScript(messageSendSrc)
	counterAddScript  = redis.NewScript(counterAddSrc)

	lobbiesCountScript   = redis.NewScript(lobbiesCountSrc)
	lobbiesReserveScript = redis.NewScript(lobbiesReserveSrc)
	lobbiesTopScript     = redis.NewScript(lobbiesTopSrc)
	readMarkScript       = redis.NewScript(readMarkSrc)
	unreadCountScript    = redis.NewScript(unreadCountSrc)
)
