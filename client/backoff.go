package client

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with full jitter: the n-th consecutive
// failure (from 0) waits a uniformly random time in [0, min(Max, Min·2ⁿ)].
// Full jitter spreads the clients a failed node had over time, so that
// they do not all come back in the same instant (every client of a node
// that died fails at once; equal delays would make them retry at once,
// every time).
type Backoff struct {
	Min time.Duration // the first ceiling; 0 means 100 ms
	Max time.Duration // the largest ceiling; 0 means 10 s
}

func (b Backoff) withDefaults() Backoff {
	if b.Min <= 0 {
		b.Min = 100 * time.Millisecond
	}
	if b.Max <= 0 {
		b.Max = 10 * time.Second
	}
	if b.Max < b.Min {
		b.Max = b.Min
	}
	return b
}

// Delay returns the wait before retry n (n ≥ 0 failures so far).
func (b Backoff) Delay(n int) time.Duration {
	b = b.withDefaults()
	ceil := b.Min
	for i := 0; i < n && ceil < b.Max; i++ {
		ceil *= 2
	}
	ceil = min(ceil, b.Max)
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// sleep waits d or until ctx ends; it reports whether the whole d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
