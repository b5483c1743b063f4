package realtime

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/rooms"
)

// Blocks, in rooms.
//
// A block (package direct keeps them: a set of canonical names per user)
// hides the blocked user's messages and typing from the blocker in every
// room they share, live and in history, on every node. Each Client holds
// its user's set as an immutable *Blocks behind an atomic pointer, nil for
// the many users who block nobody: the fan-out's whole cost for them is
// one atomic load and a nil check per delivery. A hidden message still
// moves the member's Feed past it (the Feed moves its position before it
// calls deliver), so it is neither a gap nor delivered on a resume.
//
// The set is loaded when the client registers (BlockLister: one SMEMBERS)
// and replaced on every change by the event package direct publishes with
// the whole set after the change (Client.SetBlocks), on every node; after
// the bus was away every client's set is read again (Hub.ReloadBlocks). A
// load races the events: a set read before a change may answer after the
// change's event. So an event that arrives while a load runs wins over
// that load's answer (the event is at least as new), and an older load's
// answer never replaces a newer one's. The naive version — reading the
// set from Redis for every delivery — costs a round trip per message per
// member; caching it without the events leaves a block unenforced on the
// blocker's other nodes until they reconnect.

// BlockLister reads the canonical names a user blocks (package direct's
// Service.Blocks).
type BlockLister interface {
	Blocks(ctx context.Context, user string) ([]string, error)
}

// Blocks is the set of canonical names one user blocks. It is immutable;
// a nil *Blocks blocks nobody.
type Blocks struct {
	set map[string]struct{}
}

// NewBlocks returns the set of list's names (canonicalized), or nil when
// list is empty.
func NewBlocks(list []string) *Blocks {
	if len(list) == 0 {
		return nil
	}
	b := &Blocks{set: make(map[string]struct{}, len(list))}
	for _, n := range list {
		b.set[names.Canonical(n)] = struct{}{}
	}
	return b
}

// Hides reports whether the set holds user, in any case.
func (b *Blocks) Hides(user string) bool {
	if b == nil || user == "" {
		return false
	}
	if len(user) > names.MaxUser {
		return false // no valid name: the set holds none such
	}
	var buf [names.MaxUser]byte
	n := copy(buf[:], user)
	return b.has(buf[:n])
}

// has reports whether the set holds name, lowercased in place.
func (b *Blocks) has(name []byte) bool {
	lower(name)
	_, ok := b.set[string(name)] // a map lookup by a converted []byte does not allocate
	return ok
}

// Len returns the number of names in the set.
func (b *Blocks) Len() int {
	if b == nil {
		return 0
	}
	return len(b.set)
}

// Messages returns msgs without the messages of users the set holds: msgs
// itself when none is hidden.
func (b *Blocks) Messages(msgs []rooms.Message) []rooms.Message {
	if b == nil {
		return msgs
	}
	for i := range msgs {
		if b.Hides(msgs[i].From) {
			out := append(make([]rooms.Message, 0, len(msgs)-1), msgs[:i]...)
			for _, m := range msgs[i+1:] {
				if !b.Hides(m.From) {
					out = append(out, m)
				}
			}
			return out
		}
	}
	return msgs
}

func lower(p []byte) {
	for i, c := range p {
		if c >= 'A' && c <= 'Z' {
			p[i] = c + ('a' - 'A')
		}
	}
}

// fromField and roomField follow the id in every message event the send
// script publishes and encodeMessage encodes (protocol.Message's field
// order): {"type":"message","message":{"id":"…","room":"…","from":"…",…
var (
	roomField = []byte(`","room":"`)
	fromField = []byte(`","from":"`)
)

// hidesMessage reports whether the message event frame is from a user the
// set holds. It reads the sender at its fixed place in the head of the
// frame (room and user names hold no character JSON escapes) and decodes
// the frame only when that shape is not there.
func (b *Blocks) hidesMessage(frame []byte) bool {
	if from, ok := messageFrom(frame); ok {
		if len(from) == 0 || len(from) > names.MaxUser {
			return false
		}
		var buf [names.MaxUser]byte
		return b.has(buf[:copy(buf[:], from)])
	}
	var ev struct {
		Message struct {
			From string `json:"from"`
		} `json:"message"`
	}
	if json.Unmarshal(frame, &ev) != nil {
		return false
	}
	return b.Hides(ev.Message.From)
}

// messageFrom returns the sender of a message event frame by its place.
func messageFrom(p []byte) ([]byte, bool) {
	if !bytes.HasPrefix(p, messagePrefix) {
		return nil, false
	}
	p = p[len(messagePrefix):]
	i := bytes.IndexByte(p, '"')
	if i < 0 || !bytes.HasPrefix(p[i:], roomField) {
		return nil, false
	}
	p = p[i+len(roomField):]
	i = bytes.IndexByte(p, '"')
	if i < 0 || !bytes.HasPrefix(p[i:], fromField) {
		return nil, false
	}
	p = p[i+len(fromField):]
	i = bytes.IndexByte(p, '"')
	if i < 0 {
		return nil, false
	}
	return p[:i], true
}

// clientBlocks is a client's block set and the bookkeeping of its loads.
type clientBlocks struct {
	mu      sync.Mutex
	events  uint64        // sets applied from events (SetBlocks)
	loads   uint64        // loads started
	applied uint64        // the newest load whose answer was applied
	ready   chan struct{} // closed once a load was applied or an event came; nil: nothing to wait for
	once    sync.Once
}

// SetBlocks replaces the client's block set with list (canonical names):
// the set after a change, as package direct's event carries it. It wins
// over a load in flight.
func (c *Client) SetBlocks(list []string) {
	b := NewBlocks(list)
	c.bl.mu.Lock()
	c.bl.events++
	c.blocks.Store(b)
	c.bl.mu.Unlock()
	c.blocksReady()
}

// BlockSet returns the client's block set (nil: none).
func (c *Client) BlockSet() *Blocks { return c.blocks.Load() }

// hides reports whether the client's user blocks user.
func (c *Client) hides(user string) bool {
	b := c.blocks.Load()
	return b != nil && b.Hides(user)
}

// deliverMessage is a member feed's DeliverFunc: it queues the message
// event unless the client's user blocks its sender. The feed's position
// has moved past it either way.
func (c *Client) deliverMessage(_ string, frame []byte) {
	if b := c.blocks.Load(); b != nil && b.hidesMessage(frame) {
		return
	}
	c.Send(frame)
}

func (c *Client) blocksReady() {
	if c.bl.ready != nil {
		c.bl.once.Do(func() { close(c.bl.ready) })
	}
}

// waitBlocks waits until the client's block set is known (its first load
// answered): a room's history is not replayed before.
func (c *Client) waitBlocks(ctx context.Context) error {
	if c.bl.ready == nil {
		return nil
	}
	select {
	case <-c.bl.ready:
		return nil
	case <-c.done:
		return ErrClientClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loadBlocks reads the block set of user and gives it to cs, all clients
// of user, unless an event or a newer load overtook the read. It retries
// while Redis is away, until it answers, every client closed or ctx ends.
func (h *Hub) loadBlocks(ctx context.Context, user string, cs []*Client) {
	type start struct{ load, events uint64 }
	starts := make([]start, len(cs))
	for i, c := range cs {
		c.bl.mu.Lock()
		c.bl.loads++
		starts[i] = start{c.bl.loads, c.bl.events}
		c.bl.mu.Unlock()
	}
	wait := 100 * time.Millisecond
	for {
		list, err := h.d.blocks.Blocks(ctx, user)
		if err == nil {
			b := NewBlocks(list)
			for i, c := range cs {
				c.bl.mu.Lock()
				if c.bl.events == starts[i].events && starts[i].load > c.bl.applied {
					c.blocks.Store(b)
					c.bl.applied = starts[i].load
				}
				c.bl.mu.Unlock()
				c.blocksReady()
			}
			return
		}
		open := false
		for _, c := range cs {
			open = open || !c.Closing()
		}
		if !open || ctx.Err() != nil {
			return
		}
		h.d.log.Warn("load a user's blocks: retrying", "user", user, "err", err)
		sleep(ctx, wait)
		wait = min(2*wait, 2*time.Second)
	}
}

// ReloadBlocks reads every local client's block set again, one read per
// user: after the bus was away, events of changes may have been lost. It
// returns when every read answered or ctx ended.
func (h *Hub) ReloadBlocks(ctx context.Context) {
	if h.d.blocks == nil {
		return
	}
	byUser := map[string][]*Client{}
	for _, c := range h.Clients() {
		u := names.Canonical(c.p.User)
		byUser[u] = append(byUser[u], c)
	}
	for u, cs := range byUser {
		if ctx.Err() != nil {
			return
		}
		h.loadBlocks(ctx, u, cs)
	}
}
