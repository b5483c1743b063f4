package realtime

import (
	"errors"
	"fmt"

	"github.com/chatd/chatd/names"
)

// Errors of the realtime core; the transport maps them (and the domain
// packages' sentinels) to codes in its one error table.
var (
	// ErrDraining is returned by Connect while the node shuts down.
	ErrDraining = errors.New("realtime: node is draining")
	// ErrTooManyConnections is returned by Connect when the user has
	// Config.MaxConnsPerUser clients on this node.
	ErrTooManyConnections = errors.New("realtime: too many connections for this user on this node")
	// ErrEmptyText is returned for a say without text.
	ErrEmptyText = errors.New("realtime: text is empty")
	// ErrBadUTF8 is returned for a say whose text is not UTF-8.
	ErrBadUTF8 = errors.New("realtime: text is not valid UTF-8")
	// ErrTooManyFromAddr is returned by AdmitConn when the client address
	// has limit.connections_per_ip open connections across all nodes.
	ErrTooManyFromAddr = errors.New("realtime: too many connections from this address")
	// ErrTooManyBoards is returned by PostScore when the user created
	// limit.new_boards_per_user_per_minute boards in the last minute.
	ErrTooManyBoards = errors.New("realtime: too many new leaderboards")
	// ErrTooManySessions is returned by AllowSession when the address made
	// limit.sessions_per_ip_per_minute sessions in the last minute.
	ErrTooManySessions = errors.New("realtime: too many new sessions")
	// ErrTooManyLobbies is returned by a join that would create a lobby when
	// the user created limit.new_lobbies_per_user_per_minute in the last
	// minute.
	ErrTooManyLobbies = errors.New("realtime: too many new lobbies")
	// ErrTooManySeats is returned by a join of one more lobby than
	// limit.seats_per_user allows.
	ErrTooManySeats = errors.New("realtime: seats in too many lobbies")
	// ErrNodeFull is returned by AdmitConn when the node holds
	// limit.connections_per_node WebSockets.
	ErrNodeFull = errors.New("realtime: this node is full")
	// ErrTooLong is matched by a *TooLongError.
	ErrTooLong = errors.New("realtime: message too long")
)

// TooLongError is returned for a say longer than message.max_length.
type TooLongError struct{ Max, Got int }

func (e *TooLongError) Error() string {
	return fmt.Sprintf("the message is %d characters long; at most %d are allowed", e.Got, e.Max)
}

// Is makes errors.Is(err, ErrTooLong) true.
func (e *TooLongError) Is(target error) bool { return target == ErrTooLong }

// reportError sends err to the client as an error event naming the room
// and ref of the frame that caused it; a client refused for rate limiting
// too many times in a row is closed (1008).
func (n *Node) reportError(c *Client, err error, room, ref string) {
	if names.Room(room) != nil {
		room = "" // name only a room that can exist (the message quotes what was sent)
	}
	code, msg := n.errorCode(err)
	if code == "internal" || code == "redis_unavailable" {
		n.log.Warn("websocket frame failed", "user", c.user, "room", room, "code", code, "err", err)
	}
	c.SendError(code, msg, room, ref)
	if code == "rate_limited" {
		if c.Abuse() {
			c.Close(ClosePolicy, "too many messages")
		}
	} else {
		c.Good()
	}
}

// ReportError is reportError for the transport's own refusals.
func (c *Client) ReportError(err error, room, ref string) { c.node.reportError(c, err, room, ref) }

func (n *Node) errorCode(err error) (code, msg string) {
	if n.cfg.ErrorCode != nil {
		code, msg = n.cfg.ErrorCode(err)
	}
	if code == "" {
		code, msg = "internal", "internal error; it has been logged"
	}
	return code, msg
}
