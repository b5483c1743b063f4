// Package errcode defines the error codes a chatd client sees, once, next
// to the rules that produce them: a domain package declares its sentinels
// with New (rooms.ErrRoomFull = errcode.New(errcode.RoomFull, "rooms: room
// is full")), wraps them with %w as usual, and anybody — the HTTP
// transport, the WebSocket transport, the Go SDK, a test — reads the code
// back with Of. The transport maps a Code to an HTTP status in one table;
// nothing matches message strings to find a code.
//
// The naive alternative, a table in the transport from each package's
// sentinel to a code, drifts: a new sentinel that nobody adds to the table
// answers 500 "internal", and the core ends up branching on the code
// strings the transport produced. Here the code travels with the error.
//
// Redis failures get their codes too (Of classifies them): a connection
// that is refused, reset or times out, and the replies that mean the data
// store cannot serve now (LOADING, MASTERDOWN, CLUSTERDOWN, TRYAGAIN,
// READONLY, NOREPLICAS, MOVED/ASK during a failover) are RedisUnavailable;
// OOM is RedisOOM, BUSY (a script running too long) RedisBusy. Redis error
// replies are classified by their first word, the error code of the RESP
// protocol, which is what that word is for.
package errcode

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Code is a documented error code (docs/PROTOCOL.md, "Errors").
type Code string

// The codes of docs/PROTOCOL.md.
const (
	BadJSON            Code = "bad_json"
	BadRequest         Code = "bad_request"
	BadName            Code = "bad_name"
	BadValue           Code = "bad_value"
	UnknownSetting     Code = "unknown_setting"
	TooLong            Code = "too_long"
	UnknownType        Code = "unknown_type"
	BadToken           Code = "bad_token"
	Forbidden          Code = "forbidden"
	NotSeated          Code = "not_seated"
	Muted              Code = "muted"
	Banned             Code = "banned"
	NotFound           Code = "not_found"
	UnknownRoom        Code = "unknown_room"
	UnknownPlayer      Code = "unknown_player"
	UnknownItem        Code = "unknown_item"
	UnknownMessage     Code = "unknown_message"
	UnknownQueue       Code = "unknown_queue"
	UnknownTicket      Code = "unknown_ticket"
	MethodNotAllowed   Code = "method_not_allowed"
	Timeout            Code = "timeout"
	NameTaken          Code = "name_taken"
	RoomFull           Code = "room_full"
	SeatedElsewhere    Code = "seated_elsewhere"
	ResumeGap          Code = "resume_gap"
	SoldOut            Code = "sold_out"
	InsufficientFunds  Code = "insufficient_funds"
	Conflict           Code = "conflict"
	BoardFull          Code = "board_full"
	TicketOpen         Code = "ticket_open"
	ConsentRequired    Code = "consent_required"
	TooLarge           Code = "too_large"
	RateLimited        Code = "rate_limited"
	TooManyConnections Code = "too_many_connections"
	Internal           Code = "internal"
	Busy               Code = "busy"
	RedisUnavailable   Code = "redis_unavailable"
	RedisOOM           Code = "redis_oom"
	RedisBusy          Code = "redis_busy"
	Draining           Code = "draining"
	NotDurable         Code = "not_durable"
	Blocked            Code = "blocked"
	NotPrivate         Code = "not_private"
	// HookDenied: the application's backend refused (a hook's deny).
	HookDenied Code = "hook_denied"
	// HookUnavailable: a fail-closed hook's backend did not answer.
	HookUnavailable Code = "hook_unavailable"
)

// Coder is implemented by errors that carry a code: *Error, and the typed
// errors of the domain packages that say more than a sentinel can
// (rooms.RateLimitError: when to retry).
type Coder interface {
	ErrorCode() Code
}

// Retrier is implemented by refusals that know when a retry may pass (a
// rate limit's next token): the transport's Retry-After.
type Retrier interface {
	RetryIn() time.Duration
}

// RetryIn returns when err says a retry may pass, or 0.
func RetryIn(err error) time.Duration {
	var r Retrier
	if errors.As(err, &r) {
		return r.RetryIn()
	}
	return 0
}

// Error is an error with a code. As a sentinel (New) its Message is the
// package's text ("rooms: room is full"); wrapped, the wrapping text adds
// the operation and the detail, and Message(err) gives a client the part
// it can act on.
type Error struct {
	Code    Code
	Message string
	whole   bool // made by Errorf: the whole text is the client's sentence
}

// New returns a sentinel error of code c with text msg, conventionally
// prefixed with the package ("rooms: room is full").
func New(c Code, msg string) *Error { return &Error{Code: c, Message: msg} }

// Errorf returns an error of code c whose text is the formatted message:
// for refusals made on the spot, whose whole text is for the client.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...), whole: true}
}

// ClientMessager is implemented by typed errors that word their own
// client sentence (rooms.RateLimitError: "wait 1.2 s").
type ClientMessager interface {
	ClientMessage() string
}

func (e *Error) Error() string { return e.Message }

// ErrorCode returns e's code.
func (e *Error) ErrorCode() Code { return e.Code }

// Of returns the code of err: the code of the first error in its chain
// that carries one (Coder), else the code of a Redis failure (see the
// package doc), else Internal. Of(nil) is "".
func Of(err error) Code {
	if err == nil {
		return ""
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	if rc := redisCode(err); rc != "" {
		return rc
	}
	return Internal
}

// Is reports whether err carries code c.
func Is(err error, c Code) bool { return err != nil && Of(err) == c }

// Message returns the sentence a client sees for err: for a wrapped
// sentinel the text after the sentinel's own ("rooms: join x: bad name:
// lobby name "a b" may only hold …" gives "Lobby name "a b" may only
// hold …"), or the sentinel's text without its package prefix; for an
// *Error made by Errorf or another Coder its whole text; for Redis
// failures and internal errors a fixed sentence (an internal error's text
// may hold what a client should not see).
func Message(err error) string {
	if err == nil {
		return ""
	}
	var c Coder
	if !errors.As(err, &c) {
		switch redisCode(err) {
		case RedisUnavailable:
			return "The data store is unavailable; retry in a moment"
		case RedisOOM:
			return "The data store is out of memory; retry later"
		case RedisBusy:
			return "The data store is busy; retry in a moment"
		}
		return "Internal error; it has been logged"
	}
	if m, ok := c.(ClientMessager); ok {
		return sentence(m.ClientMessage())
	}
	if e, ok := c.(*Error); ok && e.whole {
		return e.Message
	}
	if ce, ok := c.(error); ok {
		return detail(err.Error(), ce.Error())
	}
	return sentence(err.Error())
}

// detail is the part of s after the sentinel text st and ": ", or st
// without its package prefix ("rooms: room is full" → "Room is full").
func detail(s, st string) string {
	if i := strings.Index(s, st+": "); i >= 0 {
		return sentence(s[i+len(st)+2:])
	}
	return sentence(stripPackage(st))
}

// Sentence is s as a client sentence: trimmed, its first letter
// capitalised unless it starts with a setting key or a name.
func Sentence(s string) string { return sentence(s) }

// sentence trims s and capitalises its first letter, unless s starts with
// a setting key or a name ("rate.messages_per_second must be …"), whose
// case is kept.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "Bad request"
	}
	if i := strings.IndexAny(s, " :"); i > 0 && strings.ContainsAny(s[:i], "._") {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// stripPackage drops a sentinel's package prefix ("rooms: room is full" →
// "room is full"): a leading lower-case word and ": ".
func stripPackage(s string) string {
	word, rest, ok := strings.Cut(s, ": ")
	if !ok || word == "" {
		return s
	}
	for _, r := range word {
		if r < 'a' || r > 'z' {
			return s
		}
	}
	return rest
}
