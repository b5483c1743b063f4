package direct

import (
	"fmt"
	"time"

	"github.com/chatd/chatd/errcode"
)

var (
	// ErrBlocked is returned by Open, Send and CheckReach when either user
	// of the pair blocks the other: a blocked user cannot open or write to a
	// conversation with the blocker (nor the blocker to them, until they
	// unblock). Its code is errcode.Blocked.
	ErrBlocked = errcode.New(errcode.Blocked, "direct: blocked")

	// ErrNoConversation is returned for a conversation that does not exist,
	// or of which the caller is not one of the pair: an outsider learns
	// nothing, not even that it exists. Its code is errcode.NotFound.
	ErrNoConversation = errcode.New(errcode.NotFound, "direct: no such conversation")

	// ErrSelf is returned by Open and Block for the caller's own name.
	ErrSelf = errcode.New(errcode.BadRequest, "direct: a conversation is between two different users")

	// ErrRefReused is returned by Send when the idempotency key already
	// recorded another text in the conversation. Its code is errcode.BadRequest, as for a room.
	ErrRefReused = errcode.New(errcode.BadRequest, "direct: the idempotency key was used for another message")

	// ErrRateLimited is returned, as a *RateLimitError, by Send when the
	// sender's bucket in the conversation is empty, and by Open when the
	// opener's budget of new conversations is spent.
	ErrRateLimited = errcode.New(errcode.RateLimited, "direct: too fast")

	// ErrTooManyBlocks is returned by Block past MaxBlocks. Its code is
	// errcode.BadValue.
	ErrTooManyBlocks = errcode.New(errcode.BadValue, "direct: too many blocks")

	// ErrBadID is returned for a message id that is not a stream id.
	ErrBadID = errcode.New(errcode.BadRequest, "direct: malformed message id")

	// ErrTooLong is returned by Send for a text over MaxText bytes or empty.
	ErrTooLong = errcode.New(errcode.TooLong, "direct: text must be 1 to 2000 bytes")
)

// RateLimitError is ErrRateLimited with when to retry.
type RateLimitError struct {
	// What was refused: "send" or "open".
	What string
	// RetryAfter is how long until a retry may pass.
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("%v: %s: retry after %v", ErrRateLimited, e.What, e.RetryAfter)
}

// Is reports whether target is ErrRateLimited.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimited }

// ErrorCode is errcode.RateLimited.
func (e *RateLimitError) ErrorCode() errcode.Code { return errcode.RateLimited }

// ClientMessage says what to do.
func (e *RateLimitError) ClientMessage() string {
	if e.What == "open" {
		return fmt.Sprintf("too many new conversations; wait %.0f s", max(e.RetryAfter.Seconds(), 1))
	}
	return fmt.Sprintf("sending too fast; wait %.1f s", max(e.RetryAfter.Seconds(), 0.1))
}

// RetryIn is the time until a retry may pass.
func (e *RateLimitError) RetryIn() time.Duration { return e.RetryAfter }
