package realtime

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/rooms"
)

// markTracker is the part of the dirty tracker the marker needs.
type markTracker interface {
	MarkUsers(ctx context.Context, users []string, bits dirty.Mask) error
	MarkFollowers(ctx context.Context, topic string, bits dirty.Mask) error
	MarkAll(ctx context.Context, bits dirty.Mask) error
}

// roomReader reads a room's record (its members).
type roomReader interface {
	Room(ctx context.Context, roomID string) (rooms.Room, error)
}

var (
	_ markTracker = (*dirty.Tracker)(nil)
	_ roomReader  = (*rooms.Seats)(nil)
)

// marker sets the dirty bits of REST sessions after a change, coalesced:
// at most one mark per key runs at a time, and the bits asked for while one
// runs fold into a single rerun after it. Producers call it per event; the
// marks it sends are bounded by how long a mark takes, not by how many
// events there are. Every use case that changes what a poll shows marks
// through it (a say marks the room, a post the board's followers, a
// purchase the wallet, a settings write everyone), so no handler has to
// remember to.
type marker struct {
	dirty markTracker
	rooms roomReader
	run   func(fn func(ctx context.Context)) bool
	log   *slog.Logger

	mu      sync.Mutex
	pending map[string]*dirty.Mask // key → bits asked for while its mark runs
}

// do runs mark(bits) for key now, unless one runs: then bits wait for it.
func (mk *marker) do(key string, bits dirty.Mask, mark func(context.Context, dirty.Mask)) {
	mk.mu.Lock()
	if mk.pending == nil {
		mk.pending = map[string]*dirty.Mask{}
	}
	if again, ok := mk.pending[key]; ok {
		*again |= bits
		mk.mu.Unlock()
		return
	}
	mk.pending[key] = new(dirty.Mask)
	mk.mu.Unlock()
	started := mk.run(func(ctx context.Context) {
		for {
			mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			mark(mctx, bits)
			cancel()
			mk.mu.Lock()
			again := mk.pending[key]
			bits = *again
			*again = 0
			if bits == 0 || ctx.Err() != nil {
				delete(mk.pending, key)
				mk.mu.Unlock()
				return
			}
			mk.mu.Unlock()
		}
	})
	if !started { // the node stopped: nothing will run for key again
		mk.mu.Lock()
		delete(mk.pending, key)
		mk.mu.Unlock()
	}
}

// room sets bits in the masks of the REST sessions of the room's members.
// Keys are room ids, "lb:<board>" topics, "u:<user>" and "*", which can't
// collide (room ids hold no ':').
func (mk *marker) room(room string, bits dirty.Mask) {
	mk.do(room, bits, func(ctx context.Context, bits dirty.Mask) {
		r, err := mk.rooms.Room(ctx, room)
		if err != nil {
			return
		}
		if err := mk.dirty.MarkUsers(ctx, r.Members, bits); err != nil {
			mk.log.Debug("mark room members dirty", "room", room, "err", err)
		}
	})
}

// BoardTopic is the dirty-tracking topic of a board: its followers are the
// players who posted to it.
func BoardTopic(board string) string { return "lb:" + board }

// BoardOfTopic returns the board of a followed topic (BoardTopic).
func BoardOfTopic(t string) (string, bool) { return strings.CutPrefix(t, "lb:") }

// board marks the followers of a board that a post changed.
func (mk *marker) board(board string) {
	key := BoardTopic(board)
	mk.do(key, dirty.Of(dirty.Leaderboards), func(ctx context.Context, bits dirty.Mask) {
		if err := mk.dirty.MarkFollowers(ctx, key, bits); err != nil {
			mk.log.Debug("mark board followers", "board", board, "err", err)
		}
	})
}

// user marks every REST session of user.
func (mk *marker) user(user string, bits dirty.Mask) {
	mk.do("u:"+user, bits, func(ctx context.Context, bits dirty.Mask) {
		if err := mk.dirty.MarkUsers(ctx, []string{user}, bits); err != nil {
			mk.log.Debug("mark user dirty", "user", user, "err", err)
		}
	})
}

// all marks every live REST session: after a settings write or a new
// notice, by the node that took the write, once.
func (mk *marker) all(bits dirty.Mask) {
	mk.do("*", bits, func(ctx context.Context, bits dirty.Mask) {
		if err := mk.dirty.MarkAll(ctx, bits); err != nil {
			mk.log.Warn("mark all sessions dirty", "err", err)
		}
	})
}

// Marks is the node's coalesced dirty marks (one per key at a time, the
// bits asked for meanwhile folded into one rerun) for the use cases built
// above the core: a mark they set goes through the same coalescing as the
// core's own.
type Marks struct{ mk *marker }

// All marks every live REST session with bits, once, from this node:
// after a settings write or a new notice.
func (m Marks) All(bits dirty.Mask) { m.mk.all(bits) }

// Room marks the REST members of room with bits: after a message the core
// did not send itself (the system's).
func (m Marks) Room(room string, bits dirty.Mask) { m.mk.room(room, bits) }

// Board marks the followers of a board a post changed (ranking's
// OnChange).
func (m Marks) Board(board string) { m.mk.board(board) }

// User marks bits dirty for user's sessions.
func (m Marks) User(user string, bits dirty.Mask) { m.mk.user(user, bits) }
