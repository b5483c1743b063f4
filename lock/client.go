package lock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
)

// Config configures a Client. The zero value is ready to use.
type Config struct {
	// Prefix is the key prefix; "" means keyspace.DefaultPrefix ("chatd").
	Prefix string
	// Registerer receives the metrics (wait-time histogram, contention and
	// expiry counters); nil registers none. Clients may share a registry.
	Registerer prometheus.Registerer
}

// Client acquires locks on one Redis or Redis Cluster. It is safe for
// concurrent use; make one per process and share it.
type Client struct {
	rdb          redis.UniversalClient
	ctxDeadlines bool // rdb bounds commands by their context's deadline
	space        keyspace.Space
	m            *metrics
}

// New returns a Client that keeps its locks in rdb.
//
// Every call is bounded by its context's deadline (and Acquire by
// Options.Wait): when Redis does not answer (a SIGSTOPped or hung server),
// the call returns ErrNoAnswer at the deadline, whatever rdb's timeouts are.
// Configure rdb with ContextTimeoutEnabled: true, so go-redis itself stops at
// the deadline; without it, a call under a deadline runs on a goroutine of
// its own (slower), which keeps one of rdb's connections until rdb's
// ReadTimeout. A context without deadline is canceled promptly while
// Acquire waits between tries, but a call already sent to a hung Redis ends
// only at rdb's ReadTimeout (go-redis's default: 5s, retried MaxRetries
// times). So give rdb a finite ReadTimeout too.
func New(rdb redis.UniversalClient, cfg Config) *Client {
	return &Client{
		rdb:          rdb,
		ctxDeadlines: honorsDeadlines(rdb),
		space:        keyspace.New(cfg.Prefix),
		m:            newMetrics(cfg.Registerer),
	}
}

// Keys returns the two keys of the lock name ("kind:id", e.g.
// "lobby:general"): the lock key (STRING, the owner's token, PX ttl) and the
// fence key (STRING, the INCR counter of fences issued, no TTL). Both carry
// the hash tag {kind:id}, as must every key a caller's script checks with
// FenceCheckLua. Keys does not validate name; Acquire and FencedHSet do.
func (c *Client) Keys(name string) (lockKey, fenceKey string) {
	kind, id, _ := splitName(name)
	return c.lockKey(kind, id), c.fenceKey(kind, id)
}

func (c *Client) lockKey(kind, id string) string  { return lockKey(c.space, kind, id) }
func (c *Client) fenceKey(kind, id string) string { return fenceKey(c.space, kind, id) }

// Options tune one Acquire or Do. A nil *Options means the zero value.
type Options struct {
	// Wait is how long Acquire keeps trying; 0 means until the context ends.
	Wait time.Duration
	// MinBackoff is the first pause between tries; 0 means 5ms. Pauses
	// double up to MaxBackoff and are jittered (a random half to whole of
	// the current pause), so waiters on many nodes do not retry in step.
	MinBackoff time.Duration
	// MaxBackoff caps the pause between tries; 0 means 200ms.
	MaxBackoff time.Duration
	// Watchdog refreshes the lock to its full ttl every ttl/3 until Release,
	// so a holder that runs longer than ttl keeps it while its process lives
	// and can reach Redis. See Lock.Lost.
	Watchdog bool
}

const (
	defaultMinBackoff = 5 * time.Millisecond
	defaultMaxBackoff = 200 * time.Millisecond
)

// Acquire takes the lock name ("kind:id") for ttl (at least 1ms), trying
// again with jittered exponential backoff while another owner holds it.
//
// Each try is one round trip: a script that does SET NX PX and, when that
// succeeds, INCRs the name's fence, so every acquisition gets a fence greater
// than all before it. Acquire returns ErrNotObtained when opts.Wait passed
// (wrapped together with ErrNoAnswer when a try was still out then: Redis had
// answered that another owner holds the lock, but not the last try), the
// context's error when ctx ended, ErrNoAnswer (with the context's error) when
// Redis did not answer in time, names.ErrBadName for a malformed name,
// and other Redis errors as they come, all wrapped with the name. Waiters are
// not served in order.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts *Options) (*Lock, error) {
	return c.acquire(ctx, name, ttl, opts, true)
}

// TryAcquire is Acquire with a single try: it returns ErrNotObtained at once
// when another owner holds the lock.
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration) (*Lock, error) {
	return c.acquire(ctx, name, ttl, nil, false)
}

func (c *Client) acquire(ctx context.Context, name string, ttl time.Duration, opts *Options, wait bool) (*Lock, error) {
	kind, id, err := checkName(name)
	if err != nil {
		return nil, fmt.Errorf("lock: acquire: %w", err)
	}
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("lock: acquire %s: ttl %v is below 1ms", name, ttl)
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = defaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = defaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)

	l := &Lock{
		c:        c,
		name:     name,
		key:      c.lockKey(kind, id),
		fenceKey: c.fenceKey(kind, id),
		token:    newToken(),
		ttl:      ttl,
		lost:     make(chan struct{}),
	}
	keys := []string{l.key, l.fenceKey}
	ttlMS := ttl.Milliseconds()

	start := time.Now()
	wctx := ctx
	if wait && o.Wait > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, o.Wait)
		defer cancel()
	}
	// An abandoned try that Redis runs after all must not keep the lock.
	late := func(r reply) {
		if r.err == nil {
			_, _ = c.call(context.WithoutCancel(ctx), releaseScript, nil, keys[:1], l.token)
		}
	}
	var timer *time.Timer
	held := false // Redis has answered that another owner holds the lock
	for try := 0; ; try++ {
		sent := time.Now()
		v, err := c.call(wctx, acquireScript, late, keys, l.token, ttlMS)
		switch {
		case err == nil:
			l.fence = v.(int64)
			c.m.obtained.Observe(time.Since(start).Seconds())
			if o.Watchdog {
				l.startWatchdog(ctx, sent)
			}
			return l, nil
		case errors.Is(err, redis.Nil):
			held = true
			if try == 0 {
				c.m.contended.Inc()
			}
		case errors.Is(err, errAbandoned) && held && ctx.Err() == nil:
			// The wait passed while a try was out, after Redis had answered
			// that another owner holds the lock: not obtained within the
			// wait, which a caller must be able to tell from a Redis that
			// never answered. (On a loaded machine the last try is often
			// out when the wait ends; a lock it may yet take is released
			// when its answer arrives.)
			return nil, fmt.Errorf("%w, its last try unanswered (%w)", c.stopped(ctx, name, o.Wait, start), ErrNoAnswer)
		case errors.Is(err, errAbandoned):
			c.m.failed.Observe(time.Since(start).Seconds())
			return nil, fmt.Errorf("lock: acquire %s: %w %s: %w", name, ErrNoAnswer, c.bound(ctx, o.Wait), wctx.Err())
		case wctx.Err() != nil:
			return nil, c.stopped(ctx, name, o.Wait, start)
		default:
			c.m.failed.Observe(time.Since(start).Seconds())
			return nil, fmt.Errorf("lock: acquire %s: %w", name, err)
		}
		if !wait {
			c.m.notObtained.Observe(time.Since(start).Seconds())
			return nil, fmt.Errorf("lock: acquire %s: %w", name, ErrNotObtained)
		}

		pause := o.MinBackoff << min(try, 30)
		if pause <= 0 || pause > o.MaxBackoff {
			pause = o.MaxBackoff
		}
		pause = pause/2 + rand.N(pause/2+1)
		if timer == nil {
			timer = time.NewTimer(pause)
			defer timer.Stop()
		} else {
			timer.Reset(pause)
		}
		select {
		case <-timer.C:
		case <-wctx.Done():
			return nil, c.stopped(ctx, name, o.Wait, start)
		}
	}
}

// stopped returns Acquire's error once its wait context ended: the caller's
// context error, or ErrNotObtained when Options.Wait passed.
func (c *Client) stopped(ctx context.Context, name string, wait time.Duration, start time.Time) error {
	if err := ctx.Err(); err != nil {
		c.m.canceled.Observe(time.Since(start).Seconds())
		return fmt.Errorf("lock: acquire %s: %w", name, err)
	}
	c.m.notObtained.Observe(time.Since(start).Seconds())
	return fmt.Errorf("lock: acquire %s: %w after waiting %v", name, ErrNotObtained, wait)
}

// bound says which bound ended an unanswered try.
func (c *Client) bound(ctx context.Context, wait time.Duration) string {
	if ctx.Err() == nil {
		return fmt.Sprintf("within the wait of %v", wait)
	}
	return "before the context ended"
}

// Do acquires the lock name as Acquire does, runs fn while holding it and
// releases it, even when fn panics. fn's context is ctx, canceled with cause
// ErrNotHeld if the watchdog (opts.Watchdog) finds the lock lost.
//
// Do returns Acquire's error without calling fn; otherwise fn's error joined
// with Release's, which is ErrNotHeld when the lock expired before fn
// returned (fn then ran, at least at its end, without exclusion; a fenced
// write such as FencedHSet refuses what it wrote too late). The release runs
// even when ctx has ended, bounded by the Redis client's timeouts.
func (c *Client) Do(ctx context.Context, name string, ttl time.Duration, opts *Options, fn func(ctx context.Context, l *Lock) error) (err error) {
	l, err := c.Acquire(ctx, name, ttl, opts)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if opts != nil && opts.Watchdog {
		go func() {
			select {
			case <-l.lost:
				cancel(fmt.Errorf("lock: %s: %w", name, ErrNotHeld))
			case <-fctx.Done():
			}
		}()
	}
	defer func() {
		err = errors.Join(err, l.Release(context.WithoutCancel(ctx)))
	}()
	return fn(fctx, l)
}

// newToken returns 128 random bits in hex: an owner token no other
// acquisition anywhere will ever hold.
func newToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b[:])
}

// errAbandoned is returned by call when ctx ended before Redis answered.
var errAbandoned = errors.New("abandoned")

type reply struct {
	v   any
	err error
}

// honorsDeadlines reports whether rdb bounds every command by its
// context's deadline (go-redis ContextTimeoutEnabled).
func honorsDeadlines(rdb redis.UniversalClient) bool {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// call runs script s and returns its result; errAbandoned when ctx ended
// before Redis answered; ctx's error when it had ended before.
//
// A context deadline must bound the call even when Redis hangs, but go-redis
// watches it only with ContextTimeoutEnabled; without it, a call under a
// deadline runs on a goroutine of its own, which call abandons at the
// deadline, handing a later answer to late (if not nil) on that goroutine.
// Every other call runs directly (a goroutine hand-off costs more than the
// round trip on a busy machine); one under a context without deadline ends
// at the client's own timeouts when Redis hangs.
func (c *Client) call(ctx context.Context, s *redis.Script, late func(reply), keys []string, args ...any) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok || c.ctxDeadlines {
		v, err := s.Run(ctx, c.rdb, keys, args...).Result()
		if err != nil && ctx.Err() != nil && !isReply(err) {
			return nil, errAbandoned
		}
		return v, err
	}
	const (
		waiting = iota
		answered
		abandoned
	)
	var state atomic.Int32
	ch := make(chan reply, 1)
	go func() {
		v, err := s.Run(ctx, c.rdb, keys, args...).Result()
		if state.CompareAndSwap(waiting, answered) {
			ch <- reply{v, err}
			return
		}
		if late != nil {
			late(reply{v, err})
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		if state.CompareAndSwap(waiting, abandoned) {
			return nil, errAbandoned
		}
		r := <-ch // answered just now
		return r.v, r.err
	}
}

// isReply reports whether err is an answer from Redis (nil reply or error
// reply) rather than a failure to get one.
func isReply(err error) bool {
	var re redis.Error
	return errors.Is(err, redis.Nil) || errors.As(err, &re)
}
