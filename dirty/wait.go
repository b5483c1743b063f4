package dirty

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chatd/chatd/internal/bus"
)

// MaxWait is the longest a Wait blocks; longer waits are cut to it.
const MaxWait = 30 * time.Second

// waitMargin is how much longer a waiter registration lives in Redis than
// the poll itself, so that it cannot expire under a waiting poll.
const waitMargin = 2 * time.Second

// Subscriber is the part of the node's Bus a Tracker needs.
type Subscriber interface {
	Subscribe(ctx context.Context, channel string, h bus.Handler) (*bus.Subscription, error)
}

var _ Subscriber = (*bus.Bus)(nil)

// Start subscribes this node's wake channel through sub, and returns once
// Redis confirmed the subscription. Call it once, before any Wait. A
// reconnect of the Bus wakes every local waiter, so a wake-up published
// while the connection was down costs at most one extra Take. It returns the
// Subscribe error.
func (t *Tracker) Start(ctx context.Context, sub Subscriber) error {
	t.startMu.Lock()
	defer t.startMu.Unlock()
	if t.sub != nil {
		return nil
	}
	s, err := sub.Subscribe(ctx, t.channel, bus.HandlerFuncs{
		OnReceive: func(_ string, payload []byte) {
			t.metrics.wakes.Inc()
			t.waiters.wake(string(payload))
		},
		OnResubscribed: func() {
			n := t.waiters.wakeAll()
			t.log.Info("wake channel resubscribed; woke local long polls", "waiters", n)
		},
	})
	if err != nil {
		return fmt.Errorf("dirty: start: subscribe %s: %w", t.channel, err)
	}
	t.sub = s
	t.started.Store(true)
	return nil
}

// Stop unsubscribes the wake channel; waiting polls return clean at once and
// later Waits answer ErrNotStarted. It returns the unsubscribe error.
func (t *Tracker) Stop(ctx context.Context) error {
	t.startMu.Lock()
	defer t.startMu.Unlock()
	if t.sub == nil {
		return nil
	}
	t.started.Store(false)
	t.waiters.wakeAll()
	err := t.sub.Close(ctx)
	t.sub = nil
	if err != nil {
		return fmt.Errorf("dirty: stop: %w", err)
	}
	return nil
}

// Wait is a long poll: it returns the session's dirty mask as soon as it is
// not clean, taking it as Take does, or a clean mask after max (cut to
// MaxWait; max <= 0 is a plain Take). While clean it registers "a poll of
// session waits on this node" in Redis, in the same script that found it
// clean, and sleeps on an in-process waiter; the mark script publishes the
// session id to this node's wake channel. It never polls Redis in a loop: it
// runs one script per wake-up, each call keyed and bounded as Take's, so
// that go-redis' retry of it answers the mask the first copy took. It
// returns ctx's error if ctx ends first, ErrNotStarted before Start, an
// error wrapping ErrBadID for a bad id, or the Redis error.
func (t *Tracker) Wait(ctx context.Context, session string, max time.Duration) (Mask, error) {
	if max <= 0 {
		return t.Take(ctx, session)
	}
	if err := checkID("session", session); err != nil {
		return 0, fmt.Errorf("dirty: wait: %w", err)
	}
	if !t.started.Load() {
		return 0, ErrNotStarted
	}
	max = min(max, MaxWait)
	w := t.waiters.add(session)
	defer t.waiters.remove(session, w)
	t.metrics.waiting.Inc()
	defer t.metrics.waiting.Dec()

	deadline := time.Now().Add(max)
	timer := time.NewTimer(max)
	defer timer.Stop()
	for {
		reg := time.Until(deadline) + waitMargin
		m, err := t.take(ctx, session, t.channel, reg)
		if err != nil {
			return 0, fmt.Errorf("dirty: wait %s: %w", session, err)
		}
		if m != 0 {
			t.metrics.take(m)
			return m, nil
		}
		select {
		case <-w.ch:
			if !t.started.Load() {
				t.metrics.take(0)
				return 0, nil
			}
		case <-timer.C:
			// A mark racing the deadline stays in Redis for the next poll.
			t.metrics.take(0)
			return 0, nil
		case <-ctx.Done():
			return 0, fmt.Errorf("dirty: wait %s: %w", session, ctx.Err())
		}
	}
}

// waiter is one Wait in progress on this node.
type waiter struct {
	ch chan struct{} // capacity 1: a wake-up is never blocked nor lost
}

const waiterShards = 32

// waiterSet holds this node's waiting polls by session, behind sharded locks.
type waiterSet struct {
	shards [waiterShards]struct {
		mu sync.Mutex
		m  map[string]map[*waiter]struct{}
	}
}

func newWaiterSet() *waiterSet {
	s := &waiterSet{}
	for i := range s.shards {
		s.shards[i].m = map[string]map[*waiter]struct{}{}
	}
	return s
}

func (s *waiterSet) shard(session string) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(session); i++ {
		h = (h ^ uint32(session[i])) * 16777619
	}
	return int(h % waiterShards)
}

func (s *waiterSet) add(session string) *waiter {
	w := &waiter{ch: make(chan struct{}, 1)}
	sh := &s.shards[s.shard(session)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ws := sh.m[session]
	if ws == nil {
		ws = map[*waiter]struct{}{}
		sh.m[session] = ws
	}
	ws[w] = struct{}{}
	return w
}

func (s *waiterSet) remove(session string, w *waiter) {
	sh := &s.shards[s.shard(session)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	delete(sh.m[session], w)
	if len(sh.m[session]) == 0 {
		delete(sh.m, session)
	}
}

// wake wakes every local waiter of session; it never blocks.
func (s *waiterSet) wake(session string) {
	sh := &s.shards[s.shard(session)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for w := range sh.m[session] {
		w.signal()
	}
}

// wakeAll wakes every local waiter and returns how many there were.
func (s *waiterSet) wakeAll() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for _, ws := range sh.m {
			for w := range ws {
				w.signal()
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n
}

func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}
