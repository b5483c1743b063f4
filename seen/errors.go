package seen

import (
	"errors"

	"github.com/chatd/chatd/errcode"
)

// Limits of one call.
const (
	// MaxItems is the most items one Mark, Seen or Unseen call takes.
	MaxItems = 1000
	// MaxItemLen is the longest item id, in bytes.
	MaxItemLen = 256
)

var (
	// ErrTooManyItems is returned, wrapped, by a call given more than
	// MaxItems items.
	ErrTooManyItems = errcode.New(errcode.TooLarge, "seen: too many items in one call")
	// ErrBadItem is returned, wrapped with the item's index, for an empty item
	// or one longer than MaxItemLen bytes.
	ErrBadItem = errcode.New(errcode.BadValue, "seen: item is empty or too long")
	// ErrResized is returned, wrapped, when the user's generations kept
	// needing more hash values per item than were sent (other nodes starting
	// generations under changing settings) for every retry of one call. The
	// call may be repeated.
	ErrResized = errors.New("seen: filter changed size during the call")
)
