package realtime

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/chatd/chatd/rooms"
)

// ReadFunc reads up to limit messages of one room after the message id
// after, oldest first; after == "" means the latest limit messages and
// after == StreamStart the oldest ones. It returns rooms.ErrResumeGap when
// after is no longer in the history.
type ReadFunc func(ctx context.Context, after string, limit int) ([]rooms.Message, error)

// DeliverFunc hands one message event (id, encoded frame) on, in order. It
// runs under the feed's lock and must not block.
type DeliverFunc func(id string, frame []byte)

// Feed is "catch up from history, hold live messages, then go live" for one
// room and one receiver: a client that joins or resumes, or a node's room
// after its pub/sub connection came back. Every message id reaches deliver
// once, in increasing order, whatever the interleaving of live messages
// (Live) and history reads (CatchUp).
//
// The naive version reads the history, then subscribes: a message sent in
// between is lost. Subscribing first and then reading delivers the overlap
// twice and, worse, live messages overtake the history being read. A Feed
// subscribes first (its owner does), holds live messages while it reads,
// delivers the history, then the held messages it has not delivered yet,
// all under one lock, and compares ids so the seam has neither gap nor
// duplicate.
type Feed struct {
	deliver DeliverFunc

	mu       sync.Mutex
	last     string // id of the last message delivered; "" = none yet
	since    string // every message after it reaches Live (LiveAfter); "" = not known
	rewound  bool   // the next CatchUp reads the latest messages (Rewind)
	catching bool   // CatchUp runs: live messages are held
	held     []heldMessage
	heldB    int  // bytes held
	overflow bool // held messages were dropped: read history again
}

type heldMessage struct {
	id    string
	frame []byte
}

// Hold limits: past them held messages are dropped and read from the
// history again, so a long catch-up under heavy traffic costs bounded memory.
const (
	maxHeld      = 4096
	maxHeldBytes = 4 << 20
)

// NewFeed returns a feed positioned after the message id after ("" =
// nothing delivered yet). It starts in catch-up: live messages are held
// until CatchUp or GoLive.
func NewFeed(after string, deliver DeliverFunc) *Feed {
	return &Feed{deliver: deliver, last: after, catching: true}
}

// Last returns the id of the last message delivered.
func (f *Feed) Last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// Live offers a message that arrived live: delivered now unless the feed is
// catching up (then held) or it was delivered already.
func (f *Feed) Live(id string, frame []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.catching {
		if f.overflow {
			return // will be read from history
		}
		if len(f.held) >= maxHeld || f.heldB+len(frame) > maxHeldBytes {
			f.held, f.heldB, f.overflow = nil, 0, true
			return
		}
		f.held = append(f.held, heldMessage{id, frame})
		f.heldB += len(frame)
		return
	}
	if id <= f.last {
		return
	}
	f.last = id
	f.deliver(id, frame)
}

// StreamStart is the position before a room's first message: a feed at
// StreamStart has every message of the room to deliver, and a ReadFunc
// given it reads from the oldest message. rooms.Messages.History reads "0-0" so.
const StreamStart = "0-0"

// LiveAfter records where the feed's receiver went live: every message
// after id (StreamStart: every message) reaches Live, held while the feed
// catches up. A catch-up without a position (a join) then never moves past
// one of them: when the latest page it reads does not reach back to id,
// more than that page arrived live since, and it delivers everything after
// id instead. Without it a join that reads late (its node stalled between
// subscribing and reading) would deliver the latest page and drop the
// older held messages as delivered: the receiver would silently miss them.
func (f *Feed) LiveAfter(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.since = id
}

// Rewind makes the next CatchUp read the latest messages rather than after
// the position (it was trimmed from the history, or Redis lost the stream;
// the caller has told the receiver so). The position stays the floor ids
// are compared with, so nothing already delivered comes again.
func (f *Feed) Rewind() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rewound = true
}

// atPosition runs fn with the feed's position, under its lock: no message
// is delivered while fn runs.
func (f *Feed) atPosition(fn func(last string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f.last)
}

// StartAt sets the position of a feed that has none yet, and goes live:
// messages up to id are not the feed's to deliver.
func (f *Feed) StartAt(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == "" {
		f.last = id
	}
	f.goLiveLocked()
}

// Hold puts the feed back into catch-up: live messages are held from now
// on (call it before the re-read starts, e.g. when a subscription came
// back). It reports false when a catch-up is already running.
func (f *Feed) Hold() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.catching {
		return false
	}
	f.catching = true
	return true
}

// Page limits of CatchUp.
const (
	// JoinHistory is how many of the latest messages a join replays.
	JoinHistory = 50
	// ResumeMax is the most messages a resume replays.
	ResumeMax = 1000
	pageSize  = 100
)

// CatchUp delivers the history, then goes live. With an empty position (or
// after Rewind) it delivers the latest `latest` messages not delivered yet — and, when the feed knows where
// its receiver went live (LiveAfter) and that page does not reach back to
// it, every message after that point instead; otherwise everything after
// the position, up to max messages (0 = no bound), page by page. pace, when
// set, is called before each page and may wait (for the receiver's writer
// to drain), so a large replay never piles up in a send queue. A position
// no longer in the history returns rooms.ErrResumeGap — before anything was
// delivered when the first read finds it, or after the pages delivered so
// far when the history was trimmed under a long read, or when max was
// reached short of messages the receiver is owed; the caller decides
// (typically: tell the receiver, Rewind, then CatchUp again). It never
// skips silently. Live messages held meanwhile are delivered after the
// history; if too many arrived they were dropped and are read from the
// history too.
//
// On any error the feed stays in catch-up, holding live messages, so the
// caller may retry or drop it.
func (f *Feed) CatchUp(ctx context.Context, read ReadFunc, latest, max int, pace func(context.Context) error) error {
	f.mu.Lock()
	fromLatest := f.last == "" || f.rewound
	since := f.since
	f.mu.Unlock()
	if fromLatest {
		msgs, err := read(ctx, "", latest)
		if err != nil {
			return err
		}
		f.mu.Lock()
		f.rewound = false
		// More than a page arrived since the receiver went live, and it
		// has not got them: read them all, from where it went live,
		// rather than skip them.
		owed := since != "" && since > f.last && len(msgs) == latest && latest > 0 && msgs[0].ID > since
		if owed {
			f.last = since
		}
		f.mu.Unlock()
		if owed {
			// They would have gone out live, unpaced: so do they now. A
			// paced replay of them could outlast the join's deadline.
			max, pace = 0, nil
		} else {
			f.page(msgs)
			if f.tryGoLive() {
				return nil
			}
			max = 0 // held messages were dropped: read on until caught up
		}
	}
	total := 0
	for {
		n := pageSize
		if max > 0 {
			n = min(n, max-total)
		}
		if n > 0 {
			if pace != nil {
				if err := pace(ctx); err != nil {
					return err
				}
			}
			after := f.Last()
			if after == "" {
				after = since // an empty stream at the first read: read from where the receiver went live
			}
			msgs, err := read(ctx, after, n)
			if err != nil {
				if errors.Is(err, rooms.ErrResumeGap) && after == since {
					f.mu.Lock()
					f.since = "" // gone: the receiver is told, the latest window follows
					f.mu.Unlock()
				}
				return err
			}
			f.page(msgs)
			total += len(msgs)
			if len(msgs) == n {
				continue
			}
		}
		if n == 0 {
			// max reached: what lies between the position and the live
			// messages is not replayed. When the receiver is owed some of
			// it (messages up to where it went live, or held ones that were
			// dropped), that is a gap it must be told of.
			f.mu.Lock()
			hole := f.overflow || (since != "" && f.last < since)
			f.mu.Unlock()
			if hole {
				return rooms.ErrResumeGap
			}
			f.GoLive()
			return nil
		}
		if f.tryGoLive() {
			return nil
		}
	}
}

// tryGoLive delivers the held messages and goes live unless held messages
// were dropped (then it clears the flag and reports false: read again).
func (f *Feed) tryGoLive() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.overflow {
		f.overflow = false
		return false
	}
	f.goLiveLocked()
	return true
}

// GoLive delivers what was held and ends the catch-up without reading.
func (f *Feed) GoLive() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.goLiveLocked()
}

func (f *Feed) goLiveLocked() {
	for _, h := range f.held {
		if h.id > f.last {
			f.last = h.id
			f.deliver(h.id, h.frame)
		}
	}
	f.held, f.heldB, f.overflow, f.catching = nil, 0, false, false
}

// page delivers history messages newer than the last one delivered.
func (f *Feed) page(msgs []rooms.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range msgs {
		if msgs[i].ID <= f.last {
			continue
		}
		f.last = msgs[i].ID
		f.deliver(msgs[i].ID, encodeMessage(&msgs[i]))
	}
}

// encodeMessage is the message event frame of m.
func encodeMessage(m *rooms.Message) []byte {
	b, err := json.Marshal(rooms.Event{Type: rooms.EventMessage, Message: m})
	if err != nil {
		return nil
	}
	return b
}

// readFrom is the one catch-up rule of the core, shared by the Feed (joins,
// resumes, gap fills) and the REST poll: read up to limit messages after
// the message id after ("" = the latest limit); when after is no longer in
// the history (trimmed, or Redis lost the stream), read the latest
// rooms.MaxHistoryLimit instead and report gap, so the reader gets what
// there is rather than nothing. Ids are compared by the caller, so a
// message it has already delivered is not delivered again.
func readFrom(ctx context.Context, read ReadFunc, after string, limit int) (msgs []rooms.Message, gap bool, err error) {
	msgs, err = read(ctx, after, limit)
	if after != "" && errors.Is(err, rooms.ErrResumeGap) {
		msgs, err = read(ctx, "", rooms.MaxHistoryLimit)
		return msgs, true, err
	}
	return msgs, false, err
}
