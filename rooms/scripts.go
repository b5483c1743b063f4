package rooms

import (
	_ "embed" // Lua sources

	"github.com/chatd/chatd/lock"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/ratelimit"
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
	//go:embed lua/room_grant.lua
	roomGrantSrc string
	//go:embed lua/seat_release.lua
	seatReleaseSrc string
	//go:embed lua/seat_detach.lua
	seatDetachSrc string
	//go:embed lua/seat_renew.lua
	seatRenewSrc string
	//go:embed lua/run_keep.lua
	runKeepSrc string
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
	//go:embed lua/claims_since.lua
	claimsSinceSrc string
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

// Seats: the seat scripts, with lua/lobby_lib.lua before each, and the
// reads of who sits where.
var (
	seatClaimScript   = redisx.NewScript("rooms.seat_claim", lobbyLib+seatClaimSrc)
	roomCreateScript  = redisx.NewScript("rooms.room_create", lock.FenceCheckLua+lobbyLib+roomCreateSrc)
	seatReleaseScript = redisx.NewScript("rooms.seat_release", redisx.CallRecordLua+lobbyLib+seatReleaseSrc)
	seatDetachScript  = redisx.NewScript("rooms.seat_detach", lobbyLib+seatDetachSrc)
	seatRenewScript   = redisx.NewScript("rooms.seat_renew", lobbyLib+seatRenewSrc)
	runKeepScript     = redisx.NewScript("rooms.run_keep", lobbyLib+runKeepSrc)
	lobbySweepScript  = redisx.NewScript("rooms.lobby_sweep", lobbyLib+lobbySweepSrc)
	lobbyRoomsScript  = redisx.NewScript("rooms.lobby_rooms", lobbyRoomsSrc)
	roomReadScript    = redisx.NewScript("rooms.room_read", roomReadSrc)

	// seatCap: a user's index of lobbies.
	lobbiesReserveScript = redisx.NewScript("rooms.lobbies_reserve", lobbiesReserveSrc)
)

// Private: a private room, made with the seat scripts' library.
var roomPrivateScript = redisx.NewScript("rooms.room_private", lobbyLib+roomPrivateSrc)

// roomGrantScript changes the users of a private room (Private.Grant, Revoke).
var roomGrantScript = redisx.NewScript("rooms.room_grant", roomGrantSrc)

// Messages (message_remove.lua is in remove.go).
var (
	messageSendScript = redisx.NewScript("rooms.message_send", ratelimit.BucketLua+messageSendSrc) // the say bucket
	claimsSinceScript = redisx.NewScript("rooms.claims_since", claimsSinceSrc)
	counterAddScript  = redisx.NewScript("rooms.counter_add", counterAddSrc)
)

// Lobbies: the listing index.
var (
	lobbiesCountScript = redisx.NewScript("rooms.lobbies_count", lobbiesCountSrc)
	lobbiesTopScript   = redisx.NewScript("rooms.lobbies_top", lobbiesTopSrc)
)

// ReadMarks.
var (
	readMarkScript    = redisx.NewScript("rooms.read_mark", readMarkSrc)
	unreadCountScript = redisx.NewScript("rooms.unread_count", unreadCountSrc)
)
