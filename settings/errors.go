package settings

import (
	"github.com/chatd/chatd/errcode"

	"errors"
	"fmt"
)

// Sentinel errors; compare with errors.Is. A refused write returns an *Error
// wrapping one of them.
var (
	// ErrUnknownSetting: the key is not in the registry (see Defs).
	ErrUnknownSetting = errcode.New(errcode.UnknownSetting, "settings: unknown setting")
	// ErrBadValue: the value has the wrong JSON type or is out of range.
	ErrBadValue = errcode.New(errcode.BadValue, "settings: bad value")
	// ErrStarted: Start was called twice.
	ErrStarted = errors.New("settings: already started")
)

// Error is a refused write: Reason is a sentence a person can act on, such
// as "room.capacity must be an integer from 1 to 10000; got 0". It unwraps to
// ErrBadValue or ErrUnknownSetting.
type Error struct {
	// Key is the setting the write named.
	Key string
	// Reason says what is wrong and what would be accepted.
	Reason string
	// Err is ErrBadValue or ErrUnknownSetting.
	Err error
}

// Error returns "settings: " followed by the reason.
func (e *Error) Error() string { return "settings: " + e.Reason }

// Unwrap returns ErrBadValue or ErrUnknownSetting.
func (e *Error) Unwrap() error { return e.Err }

func badValue(d *Def, format string, args ...any) error {
	return &Error{Key: d.Key, Reason: d.Key + " must be " + d.expect() + "; " + fmt.Sprintf(format, args...), Err: ErrBadValue}
}

// ErrorCode is unknown_setting or bad_value, after Err.
func (e *Error) ErrorCode() errcode.Code {
	if errors.Is(e.Err, ErrUnknownSetting) {
		return errcode.UnknownSetting
	}
	return errcode.BadValue
}

// ClientMessage is the reason: a sentence a person can act on.
func (e *Error) ClientMessage() string {
	if e.Reason == "" {
		return e.Err.Error()
	}
	return e.Reason
}
