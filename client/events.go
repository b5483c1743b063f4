package client

import (
	"encoding/json"
	"sync"
	"time"
)

// Event is what a Conn hands the application (Conn.Events): one of the
// *Event types of this file, by value. Switch on the type:
//
//	switch ev := ev.(type) {
//	case client.MessageEvent:
//		show(ev.Message)
//	case client.DisconnectedEvent:
//		log.Print(ev.Err)
//	}
type Event interface{ isEvent() }

// ConnectedEvent: a connection is open and said hello. Reconnect is false
// for the first connection; after a reconnect, every room the Conn was in
// is being resumed (a JoinedEvent with Resumed follows for each).
type ConnectedEvent struct {
	URL  string // the base URL of the node
	Node string // the node's id
	Motd string // the message of the day
	// Data is what the application's connect hook attached to this
	// connection (hello's data); nil = none.
	Data      json.RawMessage
	Reconnect bool
}

// DisconnectedEvent: the connection ended. Err says why (errors.Is it
// against ErrDraining, ErrKicked, ErrTooSlow, ErrConnLost, …). Unless Final,
// the Conn reconnects after RetryIn and resumes every room; Final is the
// last event before Events is closed.
type DisconnectedEvent struct {
	Err     error
	Reason  CloseReason // CloseAbnormal when the connection broke without a close frame
	Final   bool
	RetryIn time.Duration
}

// JoinedEvent: the connection is in Room (after Join, a resume, or a
// repeated join). Resumed is true when it came back after a reconnect (or
// an explicit Resume). Room's Members are as of the join.
type JoinedEvent struct {
	Room    Room
	Resumed bool
}

// MessageEvent: a message of a room the connection is in — history after
// a join, then live. Each message id comes at most once per room, in id
// order, across reconnects.
type MessageEvent struct{ Message Message }

// PresenceEvent: User took a seat in (State "joined") or left (State
// "left") Room.
type PresenceEvent struct{ Room, User, State string }

// TypingEvent: another member of Room is typing.
type TypingEvent struct{ Room, User string }

// SettingsEvent: a live setting changed.
type SettingsEvent struct {
	Key     string
	Value   any // float64 or string
	Version int64
}

// NoticeEvent: an admin notice.
type NoticeEvent struct{ ID, Text string }

// MessageRemovedEvent: an admin removed message ID of Room: hide it.
type MessageRemovedEvent struct{ Room, ID string }

// LeftEvent: the user left Room from another connection or over REST; the
// Conn no longer follows it.
type LeftEvent struct{ Room string }

// ResumeGapEvent: resuming Room after message After found that message no
// longer in the history (trimmed, or Redis lost its data): messages may
// have been missed; the latest ones follow. Reload the room's history if
// that matters.
type ResumeGapEvent struct{ Room, After string }

// RoomLostEvent: the connection no longer follows Room, and not because
// the application left it: the seat was lost by lease and taken, or a
// resume was refused (ErrRoomFull, ErrSeatedElsewhere). Join again to get
// back in.
type RoomLostEvent struct {
	Room string
	Err  error
}

// ErrorEvent: the server reported an error not tied to a call that waits
// for its answer (a typing frame's refusal, say).
type ErrorEvent struct{ Err *Error }

// BadFrameEvent: the server sent an event the SDK could not decode; it was
// skipped. It means a server bug or a newer protocol; the Conn goes on.
type BadFrameEvent struct {
	Err   error
	Frame string // the event's text, quoted and clipped
}

func (ConnectedEvent) isEvent()      {}
func (DisconnectedEvent) isEvent()   {}
func (JoinedEvent) isEvent()         {}
func (MessageEvent) isEvent()        {}
func (PresenceEvent) isEvent()       {}
func (TypingEvent) isEvent()         {}
func (SettingsEvent) isEvent()       {}
func (NoticeEvent) isEvent()         {}
func (MessageRemovedEvent) isEvent() {}
func (LeftEvent) isEvent()           {}
func (ResumeGapEvent) isEvent()      {}
func (RoomLostEvent) isEvent()       {}
func (ErrorEvent) isEvent()          {}
func (BadFrameEvent) isEvent()       {}

// eventQueue holds the events the connection produced and the application
// has not taken yet. The connection's reader never waits for the
// application while the queue is below its limit, so acks keep flowing (a
// Say from an event handler does not deadlock); over the limit the reader
// waits, which pushes back on the server (which in the end drops the
// connection as too slow; the Conn then resumes from the last queued
// message, so nothing is lost).
type eventQueue struct {
	mu      sync.Mutex
	cond    *sync.Cond
	items   []Event
	limit   int
	closing bool // no more pushes; the queue drains, then out is closed
	dropped bool // the application is gone (Close): drop everything
	out     chan Event
}

func newEventQueue(limit, buffer int) *eventQueue {
	q := &eventQueue{limit: limit, out: make(chan Event, buffer)}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push appends evs, waiting while the queue is over its limit.
func (q *eventQueue) push(evs ...Event) {
	if len(evs) == 0 {
		return
	}
	q.mu.Lock()
	for len(q.items) >= q.limit && !q.dropped {
		q.cond.Wait()
	}
	if !q.dropped && !q.closing {
		q.items = append(q.items, evs...)
	}
	q.cond.Broadcast()
	q.mu.Unlock()
}

// finish says no more events come; out is closed once the queue drained.
func (q *eventQueue) finish() {
	q.mu.Lock()
	q.closing = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// drop discards the queue and stops the dispatcher (Close).
func (q *eventQueue) drop() {
	q.mu.Lock()
	q.dropped, q.closing, q.items = true, true, nil
	q.cond.Broadcast()
	q.mu.Unlock()
}

// dispatch moves events to out until the queue is finished and drained,
// or dropped; stop wakes it to notice a drop while it waits on out.
func (q *eventQueue) dispatch(stop <-chan struct{}) {
	defer close(q.out)
	for {
		q.mu.Lock()
		for len(q.items) == 0 && !q.closing {
			q.cond.Wait()
		}
		if q.dropped || len(q.items) == 0 {
			q.mu.Unlock()
			return
		}
		ev := q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		q.cond.Broadcast() // room for a waiting push
		q.mu.Unlock()
		select {
		case q.out <- ev:
		case <-stop:
			return
		}
	}
}
