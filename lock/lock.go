package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Lock is one held acquisition of a lock name. Its methods are safe for
// concurrent use. Release it when done, typically in a defer, even with the
// watchdog on (the watchdog runs until Release).
type Lock struct {
	c        *Client
	name     string
	key      string // lockKey
	fenceKey string
	token    string
	fence    int64
	ttl      time.Duration

	lost     chan struct{} // closed when this Lock is found no longer held
	lostOnce sync.Once

	released atomic.Bool
	mu       sync.Mutex         // serializes Release
	stopDog  context.CancelFunc // nil without a watchdog
	dogDone  chan struct{}      // closed when the watchdog goroutine returned
}

// Name returns the lock name ("kind:id").
func (l *Lock) Name() string { return l.name }

// Token returns the owner token: 128 random bits in hex, the lock key's
// value while this Lock holds it.
func (l *Lock) Token() string { return l.token }

// Fence returns the fence number issued with this acquisition. Fences of one
// name only grow: a later acquisition always has a greater one (unless Redis
// lost its data). Pass it to FencedHSet, or to a script of your own built on
// FenceCheckLua, so a write happens only while no newer holder exists.
func (l *Lock) Fence() int64 { return l.fence }

// Lost returns a channel that is closed when this Lock is found no longer
// held — by the watchdog, Refresh, TTL or Release — because it expired and
// maybe another owner took it. A lost Lock's fenced writes are refused once
// a newer fence exists.
func (l *Lock) Lost() <-chan struct{} { return l.lost }

// Refresh resets the lock's lifetime to ttl from now, if this Lock still
// holds it; ttl <= 0 means the ttl it was acquired with. It returns
// ErrNotHeld (changing nothing) when the lock expired or another owner holds
// it, ErrNoAnswer when Redis did not answer before ctx ended, and other
// Redis errors wrapped with the name.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = l.ttl
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("lock: refresh %s: ttl %v is below 1ms", l.name, ttl)
	}
	if l.released.Load() {
		return fmt.Errorf("lock: refresh %s: %w (released)", l.name, ErrNotHeld)
	}
	v, err := l.c.call(ctx, refreshScript, nil, []string{l.key}, l.token, ttl.Milliseconds())
	if err != nil {
		return l.fail(ctx, "refresh", err)
	}
	if v.(int64) != 1 {
		l.markLost()
		return fmt.Errorf("lock: refresh %s: %w", l.name, ErrNotHeld)
	}
	return nil
}

// Release stops the watchdog and deletes the lock if this Lock still holds
// it. It returns ErrNotHeld, deleting nothing, when the lock expired or
// another owner holds it now (never a plain DEL, which would delete the new
// owner's lock), and also on a second Release. It returns ErrNoAnswer when
// Redis did not answer before ctx ended (the release may still run when
// Redis wakes up, and a retry then returns ErrNotHeld; else the lock expires
// after its ttl), and other Redis errors wrapped with the name.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopDog != nil {
		l.stopDog()
		<-l.dogDone
		l.stopDog = nil
	}
	if l.released.Load() {
		return fmt.Errorf("lock: release %s: %w (released already)", l.name, ErrNotHeld)
	}
	v, err := l.c.call(ctx, releaseScript, nil, []string{l.key}, l.token)
	if err != nil {
		return l.fail(ctx, "release", err)
	}
	l.released.Store(true)
	if v.(int64) != 1 {
		l.markLost()
		return fmt.Errorf("lock: release %s: %w", l.name, ErrNotHeld)
	}
	return nil
}

// TTL returns how long the lock has left, or 0 when this Lock no longer
// holds it. It returns ErrNoAnswer when Redis did not answer before ctx
// ended, and other Redis errors wrapped with the name.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l.released.Load() {
		return 0, nil
	}
	v, err := l.c.call(ctx, pttlScript, nil, []string{l.key}, l.token)
	if err != nil {
		return 0, l.fail(ctx, "ttl", err)
	}
	ms := v.(int64)
	if ms == -3 {
		l.markLost()
	}
	if ms < 0 {
		return 0, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// fail wraps the error of a call on this Lock.
func (l *Lock) fail(ctx context.Context, op string, err error) error {
	if errors.Is(err, errAbandoned) {
		return fmt.Errorf("lock: %s %s: %w before the context ended: %w", op, l.name, ErrNoAnswer, ctx.Err())
	}
	return fmt.Errorf("lock: %s %s: %w", op, l.name, err)
}

// markLost closes Lost and counts the expiry, once.
func (l *Lock) markLost() {
	l.lostOnce.Do(func() {
		close(l.lost)
		l.c.m.expired.Inc()
	})
}

// startWatchdog refreshes the lock every ttl/3 until Release, or until the
// lock is found lost. It keeps ctx's values but not its cancellation: the
// lock outlives the Acquire call. sent is when the winning try was sent.
func (l *Lock) startWatchdog(ctx context.Context, sent time.Time) {
	dctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l.stopDog, l.dogDone = stop, make(chan struct{})
	go l.watchdog(dctx, sent)
}

func (l *Lock) watchdog(ctx context.Context, lastOK time.Time) {
	defer close(l.dogDone)
	every := max(l.ttl/3, time.Millisecond)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := time.Now()
		// Wait for an answer as long as the lock may still exist.
		rctx, cancel := context.WithDeadline(ctx, lastOK.Add(l.ttl))
		err := l.Refresh(rctx, l.ttl)
		cancel()
		switch {
		case err == nil:
			lastOK = sent // Redis expires it no sooner than sent+ttl
		case errors.Is(err, ErrNotHeld), ctx.Err() != nil:
			return
		case time.Since(lastOK) >= l.ttl:
			// Redis has not answered for a whole ttl: the lock has expired
			// there, whatever the next answer says.
			l.markLost()
			return
		}
	}
}
