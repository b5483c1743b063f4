package rooms

import (
	"fmt"
	"time"

	"github.com/chatd/chatd/errcode"
)

// Errors returned by this package, wrapped with the operation and the names
// involved ("rooms: leave general-3 as alice: rooms: not seated in the
// room"); compare them with errors.Is, read their code with errcode.Of. A
// malformed lobby, room or user name wraps names.ErrBadName; a Redis
// failure is wrapped as it came from go-redis (a net.Error, context error
// or Redis error reply).
var (
	// ErrUnknownRoom is returned for a well-formed room id that names no
	// room: never created, or lost with Redis's data.
	ErrUnknownRoom = errcode.New(errcode.UnknownRoom, "rooms: unknown room")

	// ErrNotSeated is returned by Leave and Send when the user holds no live
	// seat in the room (never joined, left, or the lease ran out).
	ErrNotSeated = errcode.New(errcode.NotSeated, "rooms: not seated in the room")

	// ErrRoomFull is returned by Reclaim when the room has no free seat.
	ErrRoomFull = errcode.New(errcode.RoomFull, "rooms: room is full")

	// ErrSeatedElsewhere is returned by Reclaim when the user holds a live
	// seat in another room of the same lobby (a user has one seat per lobby).
	ErrSeatedElsewhere = errcode.New(errcode.SeatedElsewhere, "rooms: seated in another room of the lobby")

	// ErrBusy is returned by Join when no room could be created in the lobby
	// within twice the lock TTL (another node held the lobby's lock all along).
	ErrBusy = errcode.New(errcode.Busy, "rooms: lobby is busy, try again")

	// ErrResumeGap is returned by History when the message to read after is
	// no longer in the room's history (trimmed, or Redis lost its data):
	// messages may have been missed; rejoin and reload.
	ErrResumeGap = errcode.New(errcode.ResumeGap, "rooms: message to resume after is no longer in history")

	// ErrPrivateRoom is returned by Join for a lobby that holds a private
	// room (Private.Create), and by Reclaim of such a room by a user it was
	// not made for.
	ErrPrivateRoom = errcode.New(errcode.Forbidden, "rooms: the room is private")

	// ErrLobbyTaken is returned by Private.Create when the lobby holds rooms
	// already (a public lobby, or a private room for other users).
	ErrLobbyTaken = errcode.New(errcode.Conflict, "rooms: the lobby is taken")

	// ErrBadAttachment is returned by Join, Reclaim and Detach for an
	// attachment id that is empty, longer than 64 bytes or not made of
	// [A-Za-z0-9_:.-].
	ErrBadAttachment = errcode.New(errcode.BadRequest, "rooms: malformed attachment id")

	// ErrRateLimited is returned by Send when the sender's say bucket in
	// the lobby is empty; the error is a *RateLimitError that says when to
	// try again.
	ErrRateLimited = errcode.New(errcode.RateLimited, "rooms: saying too fast")

	// ErrBadID is returned by History and NormalizeID for a string that is
	// not a message id.
	ErrBadID = errcode.New(errcode.BadRequest, "rooms: malformed message id")

	// ErrBadText is returned by Send for empty text or text that is not UTF-8.
	ErrBadText = errcode.New(errcode.BadRequest, "rooms: text is empty or not valid UTF-8")

	// ErrBadIdempotencyKey is returned by SendMany for a SendRequest.Key
	// longer than MaxIdempotencyKey bytes or holding a byte outside
	// A–Z a–z 0–9 and - _ . : = + / @ ~ (the wrapping text says which).
	ErrBadIdempotencyKey = errcode.New(errcode.BadRequest, "rooms: malformed idempotency key")

	// ErrIdempotencyMismatch is returned by SendMany for a say whose
	// idempotency key the sender already used, within Config.IdempotencyTTL
	// and in the same lobby, for another text or another room: nothing is
	// sent.
	ErrIdempotencyMismatch = errcode.New(errcode.BadRequest, "rooms: idempotency key reused for another message")

	// ErrNotReplicated is returned by Send and SendMany under
	// Config.Durability "replica" when no replica acknowledged the message
	// within Config.DurabilityTimeout (or the WAIT failed): the message was
	// stored and published, but a failover before it reaches a replica
	// loses it. The result comes with the error; a caller that retries
	// sends it twice, unless the say carries an idempotency key.
	ErrNotReplicated = errcode.New(errcode.NotDurable, "rooms: message stored but not yet replicated")

	// ErrBadEvent is returned by DecodeEvent for bytes that are not an Event.
	ErrBadEvent = errcode.New(errcode.Internal, "rooms: malformed event")
)

// RateLimitError is the error Send returns, wrapped, when the sender's say
// bucket is empty: errors.Is(err, ErrRateLimited) holds, and errors.As
// gives the delay until a say would be accepted.
type RateLimitError struct {
	// RetryAfter is how long until the bucket holds a token again (>= 1ms).
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%v: retry after %v", ErrRateLimited, e.RetryAfter)
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// ErrorCode is errcode.RateLimited.
func (e *RateLimitError) ErrorCode() errcode.Code { return errcode.RateLimited }

// ClientMessage says how long to wait: "saying too fast; wait 1.2 s".
func (e *RateLimitError) ClientMessage() string {
	return fmt.Sprintf("saying too fast; wait %.1f s", max(e.RetryAfter.Seconds(), 0.1))
}

// RetryIn is the time until a say would be accepted.
func (e *RateLimitError) RetryIn() time.Duration { return e.RetryAfter }
