package realtime

import (
	"context"
	"errors"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// Say checks a chat message against the live settings, then sends it in
// one Redis round trip (seat check, rate limit, XADD, PUBLISH in one
// script): the path of REST posts, and of WebSocket says (through
// Client.Say). REST members of the room are marked dirty only when the
// room has any.
func (n *Node) Say(ctx context.Context, user, room, text string) (rooms.Message, error) {
	if err := n.checkSay(room, text); err != nil {
		return rooms.Message{}, err
	}
	return n.send(ctx, user, room, text)
}

func (n *Node) checkSay(room, text string) error {
	if text == "" {
		return ErrEmptyText
	}
	if !utf8.ValidString(text) {
		return ErrBadUTF8
	}
	if max, got := n.settings.Int(settings.MessageMaxLength), utf8.RuneCountInString(text); got > max {
		return &TooLongError{Max: max, Got: got}
	}
	return names.Room(room) // a bad name costs no rate-limit token
}

func (n *Node) send(ctx context.Context, user, room, text string) (rooms.Message, error) {
	if err := n.checkMuted(ctx, user); err != nil {
		return rooms.Message{}, err
	}
	res, err := n.rooms.Send(ctx, room, user, text, n.sendOptions())
	if err != nil {
		return rooms.Message{}, err
	}
	if res.HasREST {
		n.markRoom(room, dirty.Of(dirty.Messages))
	}
	return res.Message, nil
}

func (n *Node) sendOptions() rooms.SendOptions {
	rate := n.settings.Float(settings.RateMessagesPerSecond)
	return rooms.SendOptions{Rate: rate, Burst: max(rate, 1)}
}

// saySerial runs one client's says on a worker of their own, in order, so
// the connection's reader goes on reading while a say waits for Redis.
type saySerial struct {
	mu      sync.Mutex
	pending []sayReq
	running bool
	idle    *sync.Cond
}

type sayReq struct {
	room, text, ref string
}

// Say queues a say of the client: checked now (a refusal answers at once),
// sent by the client's say worker in arrival order; the ack (with ref) or
// the error follows when Redis answered. Frames other than says wait for
// the says before them (Client.Flush).
func (c *Client) Say(room, text, ref string) error {
	if err := c.node.checkSay(room, text); err != nil {
		return err
	}
	s := &c.says
	s.mu.Lock()
	s.pending = append(s.pending, sayReq{room, text, ref})
	if !s.running {
		s.running = true
		c.node.goRun(c.sayWorker)
	}
	s.mu.Unlock()
	return nil
}

// Flush waits until the client's queued says are answered.
func (c *Client) Flush() {
	s := &c.says
	s.mu.Lock()
	if s.idle == nil {
		s.idle = sync.NewCond(&s.mu)
	}
	for s.running {
		s.idle.Wait()
	}
	s.mu.Unlock()
}

func (c *Client) sayWorker(ctx context.Context) {
	s := &c.says
	for {
		s.mu.Lock()
		batch := s.pending
		s.pending = nil
		if len(batch) == 0 {
			s.running = false
			if s.idle != nil {
				s.idle.Broadcast()
			}
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		for len(batch) > 0 {
			k := min(len(batch), maxSayBatch)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			c.sayBatch(sctx, batch[:k])
			cancel()
			batch = batch[k:]
		}
	}
}

// maxSayBatch bounds the says of one client sent in one pipeline.
const maxSayBatch = 64

// sayBatch sends a client's queued says in one pipelined round trip, in
// order, and answers each (ack or error) in the same order.
func (c *Client) sayBatch(ctx context.Context, batch []sayReq) {
	n := c.node
	if err := n.checkMuted(ctx, c.user); err != nil {
		for _, r := range batch {
			n.reportError(c, err, r.room, r.ref)
		}
		return
	}
	reqs := make([]rooms.SendRequest, len(batch))
	for i, r := range batch {
		reqs[i] = rooms.SendRequest{Room: r.room, User: c.user, Text: r.text}
	}
	replies := n.rooms.SendMany(ctx, reqs, n.sendOptions())
	for i, r := range batch {
		res, err := replies[i].SendResult, replies[i].Err
		if errors.Is(err, rooms.ErrNotSeated) && c.InRoom(r.room) {
			// The seat went while this connection still shows the room (its
			// lease ran out during an outage): take it back if it is free,
			// and send once more.
			if _, rerr := n.rooms.Reclaim(ctx, r.room, c.user, rooms.Attach{ID: c.id}); rerr == nil {
				res, err = n.rooms.Send(ctx, r.room, c.user, r.text, n.sendOptions())
			}
		}
		if err != nil {
			n.reportError(c, err, r.room, r.ref)
			continue
		}
		if res.HasREST {
			n.markRoom(r.room, dirty.Of(dirty.Messages))
		}
		c.Good()
		if r.ref != "" {
			c.SendJSON(map[string]string{"type": "ack", "ref": r.ref, "id": res.Message.ID, "room": r.room})
		}
	}
}
