package moderation

import "github.com/chatd/chatd/errcode"

// Errors returned by this package, wrapped with the operation and the user
// ("moderation: mute alice: moderation: duration out of range"); compare
// them with errors.Is, read their code with errcode.Of. A malformed user
// name wraps names.ErrBadName; a Redis failure is wrapped as it came from
// go-redis.
var (
	// ErrBadDuration is returned by Mute and Ban for a duration under one
	// second or over MaxDuration (365 days).
	ErrBadDuration = errcode.New(errcode.BadRequest, "moderation: duration out of range (1s to 365 days)")

	// ErrBadReason is returned for a reason longer than MaxReason bytes or
	// not valid UTF-8.
	ErrBadReason = errcode.New(errcode.BadRequest, "moderation: reason too long or not UTF-8")

	// ErrBadEvent is returned by DecodeEvent for bytes that are not an Event.
	ErrBadEvent = errcode.New(errcode.BadRequest, "moderation: malformed event")
)
