package dirty

import (
	"errors"

	"github.com/chatd/chatd/errcode"
)

var (
	// ErrBadID is returned, wrapped with the operation and the id, for a
	// session or topic id that is empty, longer than 256 bytes, or holds a
	// byte outside printable ASCII, a space or a brace.
	ErrBadID = errcode.New(errcode.BadRequest, "dirty: bad id")
	// ErrNotStarted is returned by Wait before Start (or after Stop): no
	// wake-up could reach the waiter.
	ErrNotStarted = errors.New("dirty: tracker not started")
)
