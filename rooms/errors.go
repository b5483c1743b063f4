package rooms

import "errors"

// Errors returned by this package, wrapped with the operation and the names
// involved ("rooms: leave general-3 as alice: rooms: not seated in the
// room"); compare them with errors.Is. A malformed lobby, room or user name
// wraps names.ErrBadName; a Redis failure is wrapped as it came from
// go-redis (a net.Error, context error or Redis error reply).
var (
	// ErrUnknownRoom is returned for a well-formed room id that names no
	// room: never created, or lost with Redis's data.
	ErrUnknownRoom = errors.New("rooms: unknown room")

	// ErrNotSeated is returned by Leave and Send when the user holds no live
	// seat in the room (never joined, left, or the lease ran out).
	ErrNotSeated = errors.New("rooms: not seated in the room")

	// ErrRoomFull is returned by Reclaim when the room has no free seat.
	ErrRoomFull = errors.New("rooms: room is full")

	// ErrSeatedElsewhere is returned by Reclaim when the user holds a live
	// seat in another room of the same lobby (a user has one seat per lobby).
	ErrSeatedElsewhere = errors.New("rooms: seated in another room of the lobby")

	// ErrBusy is returned by Join when no room could be created in the lobby
	// within twice the lock TTL (another node held the lobby's lock all along).
	ErrBusy = errors.New("rooms: lobby is busy, try again")

	// ErrResumeGap is returned by History when the message to read after is
	// no longer in the room's history (trimmed, or Redis lost its data):
	// messages may have been missed; rejoin and reload.
	ErrResumeGap = errors.New("rooms: message to resume after is no longer in history")

	// ErrBadID is returned by History for an `after` that is not a message id.
	ErrBadID = errors.New("rooms: malformed message id")

	// ErrBadText is returned by Send for empty text or text that is not UTF-8.
	ErrBadText = errors.New("rooms: text is empty or not valid UTF-8")

	// ErrBadEvent is returned by DecodeEvent for bytes that are not an Event.
	ErrBadEvent = errors.New("rooms: malformed event")
)
