package direct

import (
	"context"
	"encoding/json"
	"fmt"

	dm "github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
)

// Delivery, and why the naive versions fail.
//
// A connection gets its user's direct events live from the moment it
// connects (no join), and may ask for a conversation's messages after an
// id it saw (Resume: after a reconnect, on any node). Replaying history
// while live events arrive is the seam every feed has: reading then
// delivering live loses what is sent in between; delivering live then
// reading doubles the overlap, and a live message sent before the resume
// frame came would make a "deliver what is newer than the last delivered"
// rule skip the older ones the replay should bring. So each connection
// keeps, per conversation, the one contiguous range of ids it has been
// given, (lo, hi] (lo inclusive for a range begun by a live message):
// live messages inside it are duplicates, live messages after it extend
// it, and while a replay reads, live messages of that conversation are
// held and delivered after it, each id once, in order. The live channel
// carries a conversation's messages in history order (the send script
// publishes), so a range stays contiguous; when the bus reconnects
// (messages may have been lost) each range is filled from history after
// its hi, and the connection is told (dm_gap) so it can resume the
// conversations it had not seen yet.

// clientState is one connection's ranges, by conversation.
type clientState struct {
	convs map[string]*rangeState
}

type rangeState struct {
	lo, hi  string
	loIncl  bool
	holding bool
	held    []held
}

type held struct {
	id    string
	frame []byte
}

func (r *rangeState) has(id string) bool {
	if r.hi == "" {
		return false
	}
	if r.loIncl {
		return id >= r.lo && id <= r.hi
	}
	return id > r.lo && id <= r.hi
}

// state returns c's state, made (and dropped when c is done) if need be;
// nil when the node is stopping.
func (d *Direct) state(c *realtime.Client) *clientState {
	st := d.states[c]
	if st != nil {
		return st
	}
	st = &clientState{convs: map[string]*rangeState{}}
	if !d.node.Go(func(ctx context.Context) {
		select {
		case <-c.Done():
		case <-ctx.Done():
		}
		d.mu.Lock()
		delete(d.states, c)
		d.mu.Unlock()
	}) {
		return nil
	}
	d.states[c] = st
	return st
}

// head is what delivery reads of an event.
type head struct {
	Type         string `json:"type"`
	Conversation string `json:"conversation"`
	ID           string `json:"id"`
}

// receive hands an event published on any node to this node's
// connections of the users it names.
func (d *Direct) receive(_ string, p []byte) {
	users, frame, ok := dm.DecodeEnvelope(p)
	if !ok {
		return
	}
	var h head
	if json.Unmarshal(frame, &h) != nil {
		return
	}
	if h.Type == dm.NodeEventBlocks {
		// the set after a change: the nodes' own, not the connections'
		list, err := dm.DecodeBlocks(frame)
		if err != nil {
			d.log.Warn("direct: bad blocks event", "err", err)
			return
		}
		for _, u := range users {
			for _, c := range d.hub.UserClients(u) {
				c.SetBlocks(list)
			}
		}
		return
	}
	// frame aliases the bus's buffer: each client queue gets a copy once
	frame = append([]byte(nil), frame...)
	for _, u := range users {
		for _, c := range d.hub.UserClients(u) {
			if h.Type != "dm" {
				c.Send(frame)
				continue
			}
			d.live(c, h.Conversation, h.ID, frame)
		}
	}
}

// live delivers a message to c unless c has it, holding it while a
// replay of its conversation reads.
func (d *Direct) live(c *realtime.Client, conv, id string, frame []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.state(c)
	if st == nil {
		c.Send(frame)
		return
	}
	r := st.convs[conv]
	switch {
	case r == nil:
		st.convs[conv] = &rangeState{lo: id, hi: id, loIncl: true}
	case r.holding:
		r.held = append(r.held, held{id: id, frame: frame})
		return
	case r.has(id):
		return
	case r.hi == "" || id > r.hi:
		r.hi = id
		if r.lo == "" {
			r.lo, r.loIncl = id, true
		}
	}
	c.Send(frame)
}

// maxReplay bounds one resume: past it, the connection is told a gap.
const maxReplay = 1000

// Resume sends c the messages of the conversation with with (a name or an
// id) after the id after ("" = none: only what comes live), each once,
// in order with the live ones, then a dm_resumed event (count, and gap
// when the history no longer holds what follows after). It returns
// dm.ErrNoConversation, dm.ErrBadID and Redis errors.
func (d *Direct) Resume(ctx context.Context, c *realtime.Client, with, after, ref string) error {
	conv, err := d.resolve(ctx, c.Principal(), with)
	if err != nil {
		return err
	}
	if after != "" {
		if after, err = dm.NormalizeID(after); err != nil {
			return err
		}
	}
	n, gap, err := d.replay(ctx, c, conv, after)
	if err != nil {
		return err
	}
	c.SendEvent(protocol.DMResumed{Conversation: conv.ID, After: after, Count: n, Gap: gap, Ref: ref})
	return nil
}

// replay delivers conv's history after after to c, holding live messages
// of conv meanwhile, and returns how many it delivered and whether there
// was a gap.
func (d *Direct) replay(ctx context.Context, c *realtime.Client, conv dm.Conversation, after string) (int, bool, error) {
	d.mu.Lock()
	st := d.state(c)
	if st == nil {
		d.mu.Unlock()
		return 0, false, realtime.ErrDraining
	}
	r := st.convs[conv.ID]
	if r == nil {
		r = &rangeState{}
		st.convs[conv.ID] = r
	}
	if r.holding {
		d.mu.Unlock()
		return 0, false, fmt.Errorf("%w: a resume of this conversation is running", realtime.ErrFrameRate)
	}
	r.holding = true
	d.mu.Unlock()

	sent, gap, top := 0, false, after
	var rerr error
	// page by page, each delivered as it is read (live messages of the
	// conversation are held meanwhile); without after, nothing to replay:
	// only the live ones after this
	for from, total := after, 0; after != ""; {
		page, err := d.store.History(ctx, conv, from, min(pageStep, maxReplay-total))
		if err != nil {
			rerr = err
			break
		}
		if from == after {
			gap = page.Gap
		}
		d.mu.Lock()
		for _, m := range page.Messages {
			if !r.has(m.ID) {
				c.Send(dm.EventJSON(m))
				sent++
			}
		}
		d.mu.Unlock()
		total += len(page.Messages)
		if len(page.Messages) > 0 {
			top = page.Messages[len(page.Messages)-1].ID
		}
		if !page.More {
			break
		}
		if total >= maxReplay {
			gap = true // more than maxReplay since after: read the rest over REST
			break
		}
		from = top
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	r.holding = false
	if rerr == nil && after != "" {
		// delivered now: (after, top] and what was there
		switch {
		case r.hi == "":
			r.lo, r.loIncl, r.hi = after, false, top
		default:
			if after < r.lo {
				r.lo, r.loIncl = after, false
			}
			if top > r.hi {
				r.hi = top
			}
		}
	}
	for _, h := range r.held {
		if r.has(h.id) {
			continue
		}
		if r.hi == "" || h.id > r.hi {
			r.hi = h.id
			if r.lo == "" {
				r.lo, r.loIncl = h.id, true
			}
		}
		c.Send(h.frame)
	}
	r.held = nil
	return sent, gap, rerr
}

// resubscribed fills each range from history after its end (the bus was
// away: live messages may be lost) and tells every connection that had a
// range (dm_gap) so it may resume the conversations it had not seen; and
// every connection's block set is read again (a change's event may be
// among what was lost).
func (d *Direct) resubscribed() {
	d.node.Go(func(ctx context.Context) { d.hub.ReloadBlocks(ctx) })
	d.mu.Lock()
	type job struct {
		c    *realtime.Client
		conv string
		hi   string
	}
	var jobs []job
	for c, st := range d.states {
		for id, r := range st.convs {
			if r.hi != "" {
				jobs = append(jobs, job{c, id, r.hi})
			}
		}
	}
	d.mu.Unlock()
	d.node.Go(func(ctx context.Context) {
		told := map[*realtime.Client]bool{}
		for _, j := range jobs {
			conv, err := d.store.Get(ctx, j.conv)
			if err == nil {
				_, _, err = d.replay(ctx, j.c, conv, j.hi)
			}
			if err != nil {
				d.log.Warn("direct: gap fill", "conversation", j.conv, "err", err)
			}
			if !told[j.c] {
				told[j.c] = true
				j.c.SendEvent(protocol.DMGap{})
			}
		}
	})
}
