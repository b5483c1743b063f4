package realtime

import (
	"context"
	"sync"
	"time"

	"github.com/chatd/chatd/dirty"
)

// coalescer runs dirty marks on the node's run context, at most one per
// key at a time: the bits asked for while one runs fold into a single rerun
// after it. Producers call it per event; the marks it sends are bounded by
// how long a mark takes, not by how many events there are.
type coalescer struct {
	n       *Node
	mu      sync.Mutex
	pending map[string]*dirty.Mask // key → bits asked for while its mark runs
}

// do runs mark(bits) for key now, unless one runs: then bits wait for it.
func (co *coalescer) do(key string, bits dirty.Mask, mark func(context.Context, dirty.Mask)) {
	co.mu.Lock()
	if co.pending == nil {
		co.pending = map[string]*dirty.Mask{}
	}
	if again, ok := co.pending[key]; ok {
		*again |= bits
		co.mu.Unlock()
		return
	}
	co.pending[key] = new(dirty.Mask)
	co.mu.Unlock()
	co.n.goRun(func(ctx context.Context) {
		for {
			mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			mark(mctx, bits)
			cancel()
			co.mu.Lock()
			again := co.pending[key]
			bits = *again
			*again = 0
			if bits == 0 || ctx.Err() != nil {
				delete(co.pending, key)
				co.mu.Unlock()
				return
			}
			co.mu.Unlock()
		}
	})
}

// markRoom sets bits in the masks of the REST sessions of the room's
// members. Keys are room ids and "lb:<board>" topics, which can't collide
// (room ids hold no ':').
func (n *Node) markRoom(room string, bits dirty.Mask) {
	n.marks.do(room, bits, func(ctx context.Context, bits dirty.Mask) {
		r, err := n.rooms.Room(ctx, room)
		if err != nil {
			return
		}
		if err := n.dirty.MarkUsers(ctx, r.Members, bits); err != nil {
			n.log.Debug("mark room members dirty", "room", room, "err", err)
		}
	})
}

// BoardTopic is the dirty-tracking topic of a board: its followers are the
// players who posted to it.
func BoardTopic(board string) string { return "lb:" + board }

// markBoard marks the followers of a board that a post changed (the
// ranking service's OnChange hook).
func (n *Node) markBoard(board string) {
	key := BoardTopic(board)
	n.marks.do(key, dirty.Of(dirty.Leaderboards), func(ctx context.Context, bits dirty.Mask) {
		if err := n.dirty.MarkFollowers(ctx, key, bits); err != nil {
			n.log.Debug("mark board followers", "board", board, "err", err)
		}
	})
}

// markUser marks every REST session of user (the shop's OnWalletChange
// hook).
func (n *Node) markUser(user string, bits dirty.Mask) {
	n.marks.do("u:"+user, bits, func(ctx context.Context, bits dirty.Mask) {
		if err := n.dirty.MarkUsers(ctx, []string{user}, bits); err != nil {
			n.log.Debug("mark user dirty", "user", user, "err", err)
		}
	})
}

// MarkAll marks every live REST session: after a settings write or a new
// notice, by the node that took the write, once.
func (n *Node) MarkAll(bits dirty.Mask) {
	n.marks.do("*", bits, func(ctx context.Context, bits dirty.Mask) {
		if err := n.dirty.MarkAll(ctx, bits); err != nil {
			n.log.Warn("mark all sessions dirty", "err", err)
		}
	})
}
