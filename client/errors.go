package client

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/chatd/chatd/errcode"
)

// Error is an error answer of chatd: an HTTP answer outside 2xx, or an
// error event on the WebSocket. Code is one of the documented codes
// (docs/PROTOCOL.md, "Errors"); match it with errors.Is and the sentinels
// below (errors.Is(err, client.ErrNameTaken)), or with errcode.Is(err,
// errcode.NameTaken): an *Error is an errcode.Coder.
type Error struct {
	// Code is the documented error code. An HTTP answer without chatd's
	// error shape (a balancer's 502 page) gets a code by its status:
	// internal for 5xx, not_found for 404, rate_limited for 429, else
	// bad_request.
	Code errcode.Code
	// Status is the HTTP status; 0 for a WebSocket error event.
	Status int
	// Message is the server's sentence, for a person.
	Message string
	// RetryAfter is the answer's Retry-After (every 429, some 503); 0 if
	// none.
	RetryAfter time.Duration
	// Room is the room a WebSocket error event names ("" if none).
	Room string
	// Op is the request that failed ("POST /api/v1/shop/buy") or the
	// WebSocket frame type ("say"); "" for a sentinel.
	Op string
}

// Error reads "chatd: <op>: <status>: <code>: <message>".
func (e *Error) Error() string {
	s := "chatd"
	if e.Op != "" {
		s += ": " + e.Op
	}
	if e.Status != 0 {
		s += ": " + strconv.Itoa(e.Status)
	}
	s += ": " + string(e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// ErrorCode returns e's code (errcode.Coder).
func (e *Error) ErrorCode() errcode.Code { return e.Code }

// Is reports whether target is an *Error of the same code: the sentinels
// below carry only a code, so errors.Is(err, ErrSoldOut) matches any
// sold_out answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Sentinels for the documented codes; errors.Is(err, ErrX) holds for any
// *Error of that code, wherever it came from (HTTP or WebSocket).
var (
	ErrBadJSON            = &Error{Code: errcode.BadJSON}
	ErrBadRequest         = &Error{Code: errcode.BadRequest}
	ErrBadName            = &Error{Code: errcode.BadName}
	ErrBadValue           = &Error{Code: errcode.BadValue}
	ErrUnknownSetting     = &Error{Code: errcode.UnknownSetting}
	ErrTooLong            = &Error{Code: errcode.TooLong}
	ErrUnknownType        = &Error{Code: errcode.UnknownType}
	ErrBadToken           = &Error{Code: errcode.BadToken}
	ErrForbidden          = &Error{Code: errcode.Forbidden}
	ErrNotSeated          = &Error{Code: errcode.NotSeated}
	ErrMuted              = &Error{Code: errcode.Muted}
	ErrBanned             = &Error{Code: errcode.Banned} // also a 4003 close (CloseError)
	ErrNotFound           = &Error{Code: errcode.NotFound}
	ErrUnknownRoom        = &Error{Code: errcode.UnknownRoom}
	ErrUnknownPlayer      = &Error{Code: errcode.UnknownPlayer}
	ErrUnknownItem        = &Error{Code: errcode.UnknownItem}
	ErrUnknownMessage     = &Error{Code: errcode.UnknownMessage}
	ErrMethodNotAllowed   = &Error{Code: errcode.MethodNotAllowed}
	ErrTimeout            = &Error{Code: errcode.Timeout}
	ErrNameTaken          = &Error{Code: errcode.NameTaken}
	ErrRoomFull           = &Error{Code: errcode.RoomFull}
	ErrSeatedElsewhere    = &Error{Code: errcode.SeatedElsewhere}
	ErrResumeGap          = &Error{Code: errcode.ResumeGap}
	ErrSoldOut            = &Error{Code: errcode.SoldOut}
	ErrInsufficientFunds  = &Error{Code: errcode.InsufficientFunds}
	ErrConflict           = &Error{Code: errcode.Conflict}
	ErrTooLarge           = &Error{Code: errcode.TooLarge}
	ErrRateLimited        = &Error{Code: errcode.RateLimited}
	ErrTooManyConnections = &Error{Code: errcode.TooManyConnections}
	ErrInternal           = &Error{Code: errcode.Internal}
	ErrBusy               = &Error{Code: errcode.Busy}
	ErrRedisUnavailable   = &Error{Code: errcode.RedisUnavailable}
	ErrDraining           = &Error{Code: errcode.Draining} // also a 1012 close (CloseError)
	ErrNotDurable         = &Error{Code: errcode.NotDurable}
	// ErrHookDenied: the application's backend refused (its reason in
	// Message); ErrHookUnavailable: it did not answer a fail-closed hook.
	ErrHookDenied      = &Error{Code: errcode.HookDenied}
	ErrHookUnavailable = &Error{Code: errcode.HookUnavailable}
)

// ErrClosed is returned by calls on a Conn after Close.
var ErrClosed = errors.New("client: connection closed")

// CloseReason is a WebSocket close code, as chatd uses them
// (docs/PROTOCOL.md, "Keep-alive, limits and close codes").
type CloseReason int

// The close codes chatd sends, and CloseAbnormal for a connection that
// broke without a close frame.
const (
	CloseNormal       CloseReason = 1000
	CloseGoingAway    CloseReason = 1001
	CloseAbnormal     CloseReason = 1006 // no close frame: the connection broke, or the node died
	CloseFlood        CloseReason = 1008 // 20 frames in a row refused with rate_limited
	CloseTooBig       CloseReason = 1009 // a frame over 64 KiB
	CloseInternal     CloseReason = 1011 // an internal error on the connection
	CloseDraining     CloseReason = 1012 // the node shuts down: reconnect at once, elsewhere
	CloseTooSlow      CloseReason = 1013 // the client read too slowly (or too many connections)
	CloseSessionEnded CloseReason = 4000 // signed out, or the guest name lapsed: sign in again
	CloseKicked       CloseReason = 4001 // kicked by an admin: may reconnect
	CloseBanned       CloseReason = 4003 // banned by an admin: do not reconnect
)

var closeNames = map[CloseReason]string{
	CloseNormal:       "normal",
	CloseGoingAway:    "going away",
	CloseAbnormal:     "connection lost",
	CloseFlood:        "flood",
	CloseTooBig:       "frame too big",
	CloseInternal:     "internal error",
	CloseDraining:     "node draining",
	CloseTooSlow:      "too slow",
	CloseSessionEnded: "session ended",
	CloseKicked:       "kicked",
	CloseBanned:       "banned",
}

// String names the reason ("kicked", "node draining", …).
func (r CloseReason) String() string {
	if s, ok := closeNames[r]; ok {
		return s
	}
	return "close " + strconv.Itoa(int(r))
}

// Final reports whether a Conn gives up on this reason instead of
// reconnecting: a session that ended and a ban (and a kick, unless
// ConnOptions.ReconnectAfterKick).
func (r CloseReason) Final() bool { return r == CloseSessionEnded || r == CloseBanned }

// CloseError is how a WebSocket connection ended: the close code and the
// close frame's text. errors.Is matches it against the Err* close
// sentinels, and a 4003 also against ErrBanned, a 1012 against ErrDraining.
type CloseError struct {
	Reason CloseReason
	Text   string // the close frame's text: a kick's reason, say
}

// Error reads "chatd: websocket closed: <code> <reason>: <text>".
func (e *CloseError) Error() string {
	s := fmt.Sprintf("chatd: websocket closed: %d %s", int(e.Reason), e.Reason)
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

// Is matches a *CloseError of the same Reason, and ErrBanned for 4003,
// ErrDraining for 1012.
func (e *CloseError) Is(target error) bool {
	switch t := target.(type) {
	case *CloseError:
		return t.Reason == e.Reason
	case *Error:
		return (e.Reason == CloseBanned && t.Code == errcode.Banned) ||
			(e.Reason == CloseDraining && t.Code == errcode.Draining)
	}
	return false
}

// Sentinels for the close reasons: errors.Is(err, ErrKicked). A ban is
// ErrBanned and a drain ErrDraining, as for the HTTP answers.
var (
	ErrSessionEnded  = &CloseError{Reason: CloseSessionEnded}
	ErrKicked        = &CloseError{Reason: CloseKicked}
	ErrTooSlow       = &CloseError{Reason: CloseTooSlow}
	ErrFlood         = &CloseError{Reason: CloseFlood}
	ErrFrameTooBig   = &CloseError{Reason: CloseTooBig}
	ErrServerFailed  = &CloseError{Reason: CloseInternal}
	ErrConnLost      = &CloseError{Reason: CloseAbnormal}
	ErrClosedByPeer  = &CloseError{Reason: CloseNormal}
	ErrPeerGoingAway = &CloseError{Reason: CloseGoingAway}
)

// codeForStatus is the code of an HTTP answer without chatd's error shape.
func codeForStatus(status int) errcode.Code {
	switch {
	case status >= 500:
		return errcode.Internal
	case status == 404:
		return errcode.NotFound
	case status == 429:
		return errcode.RateLimited
	case status == 401:
		return errcode.BadToken
	case status == 403:
		return errcode.Forbidden
	}
	return errcode.BadRequest
}
