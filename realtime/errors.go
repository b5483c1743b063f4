package realtime

import (
	"fmt"
	"strconv"
	"time"

	"github.com/chatd/chatd/errcode"
)

// Errors of the realtime core, each with the code a client sees; the
// transport maps codes to HTTP statuses and close codes, never these
// values one by one.
var (
	// ErrDraining is returned by Connect and by long polls while the node
	// shuts down.
	ErrDraining = errcode.New(errcode.Draining, "realtime: this node is shutting down")
	// ErrNotReady is returned by Ready while the node's pub/sub connection
	// is not receiving.
	ErrNotReady = errcode.New(errcode.RedisUnavailable, "realtime: not ready")
	// ErrTooManyConnections is returned by Connect when the user has
	// Config.MaxConnsPerUser clients on this node.
	ErrTooManyConnections = errcode.New(errcode.RateLimited, "realtime: too many connections for this user on this node")
	// ErrEmptyText is returned for a say without text.
	ErrEmptyText = errcode.New(errcode.BadRequest, "realtime: the text is empty")
	// ErrBadUTF8 is returned for a say whose text is not UTF-8.
	ErrBadUTF8 = errcode.New(errcode.BadRequest, "realtime: the text is not valid UTF-8")
	// ErrTooManyFromAddr is returned by AdmitConn when the client address
	// has limit.connections_per_ip open connections across all nodes.
	ErrTooManyFromAddr = errcode.New(errcode.TooManyConnections, "realtime: too many connections from this address")
	// ErrNodeFull is returned by AdmitConn when the node holds
	// limit.connections_per_node realtime clients.
	ErrNodeFull = errcode.New(errcode.TooManyConnections, "realtime: this node is full")
	// ErrTooManyBoards is returned by a score post that would create a
	// board beyond limit.new_boards_per_user_per_minute (or per address).
	ErrTooManyBoards = errcode.New(errcode.RateLimited, "realtime: too many new leaderboards")
	// ErrTooManyPosts is returned by a score post beyond
	// limit.score_posts_per_user_per_minute.
	ErrTooManyPosts = errcode.New(errcode.RateLimited, "realtime: too many score posts")
	// ErrTooManySessions is returned by SignIn when the address made
	// limit.sessions_per_ip_per_minute sessions in the last minute.
	ErrTooManySessions = errcode.New(errcode.RateLimited, "realtime: too many new sessions")
	// ErrTooManyLobbies is returned by a join that would create a lobby
	// beyond limit.new_lobbies_per_user_per_minute.
	ErrTooManyLobbies = errcode.New(errcode.RateLimited, "realtime: too many new lobbies")
	// ErrTooManySeats is returned by a join or resume into one more lobby
	// than limit.seats_per_user allows.
	ErrTooManySeats = errcode.New(errcode.RateLimited, "realtime: seats in too many lobbies")
	// ErrTooManyPolls is returned by a long poll of a session that has
	// MaxPollsPerSession long polls parked on this node already.
	ErrTooManyPolls = errcode.New(errcode.RateLimited, "realtime: too many long polls of this session")
	// ErrClientClosed is returned by calls on a client that is closing.
	ErrClientClosed = errcode.New(errcode.BadRequest, "realtime: the connection is closing")
	// ErrNameTaken is returned by SignIn for a guest name another guest
	// holds.
	ErrNameTaken = errcode.New(errcode.NameTaken, "realtime: the name is in use by another guest")
	// ErrMuted and ErrBanned are matched by *MutedError and *BannedError.
	ErrMuted  = errcode.New(errcode.Muted, "realtime: user is muted")
	ErrBanned = errcode.New(errcode.Banned, "realtime: user is banned")
	// ErrPartyOffline is returned by a party invitation when an invitee,
	// and by an acceptance when a player, has no live session (no
	// WebSocket, no recent poll) on any node.
	ErrPartyOffline = errcode.New(errcode.Conflict, "realtime: a party member is not online")
	// ErrMatchLobby is returned by a lobby join of a match room's lobby
	// (MatchLobbyPrefix): a match room is joined by its room id.
	ErrMatchLobby = errcode.New(errcode.Forbidden, "realtime: a match room is joined by its room id (the matched event's room), not by its lobby")
	// ErrTooLong is matched by a *TooLongError.
	ErrTooLong = errcode.New(errcode.TooLong, "realtime: message too long")
)

// TooLongError is returned for a say longer than message.max_length.
type TooLongError struct{ Max, Got int }

func (e *TooLongError) Error() string {
	return fmt.Sprintf("the message is %d characters long; at most %d are allowed", e.Got, e.Max)
}

// Is makes errors.Is(err, ErrTooLong) true.
func (e *TooLongError) Is(target error) bool { return target == ErrTooLong }

// ErrorCode is too_long.
func (e *TooLongError) ErrorCode() errcode.Code { return errcode.TooLong }

// ClientMessage is the error's text.
func (e *TooLongError) ClientMessage() string { return e.Error() }

// MutedError refuses a say of a muted user.
type MutedError struct{ Until time.Time }

func (e *MutedError) Error() string {
	return fmt.Sprintf("you are muted until %s", e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrMuted) true.
func (e *MutedError) Is(t error) bool { return t == ErrMuted }

// ErrorCode is muted.
func (e *MutedError) ErrorCode() errcode.Code { return errcode.Muted }

// ClientMessage is the error's text.
func (e *MutedError) ClientMessage() string { return e.Error() }

// BannedError refuses every request of a banned user.
type BannedError struct{ Until time.Time }

func (e *BannedError) Error() string {
	return fmt.Sprintf("you are banned until %s", e.Until.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrBanned) true.
func (e *BannedError) Is(t error) bool { return t == ErrBanned }

// ErrorCode is banned.
func (e *BannedError) ErrorCode() errcode.Code { return errcode.Banned }

// ClientMessage is the error's text.
func (e *BannedError) ClientMessage() string { return e.Error() }

// LimitError is a refusal by a per-minute cap: the cap in words and when
// the next token comes.
type LimitError struct {
	Err   error // the sentinel: ErrTooManyBoards, ErrTooManySessions, …
	Text  string
	Retry time.Duration
}

func (e *LimitError) Error() string           { return e.Err.Error() + ": " + e.Text }
func (e *LimitError) Unwrap() error           { return e.Err }
func (e *LimitError) ErrorCode() errcode.Code { return errcode.RateLimited }
func (e *LimitError) ClientMessage() string   { return e.Text }
func (e *LimitError) RetryIn() time.Duration  { return e.Retry }

// HumanDuration writes d for people, in an error's message: "30 minutes",
// "2 hours", "45 seconds".
func HumanDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	}
	return plural(int(d.Round(time.Second)/time.Second), "second")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}
