package realtime

import (
	"context"
	"sync"
	"time"
)

// group owns background goroutines: each runs on the group's context,
// Stop cancels it and waits for all of them. After Stop, Go drops new work
// instead of starting it. Every goroutine of the core that outlives the
// call that started it runs in a group (a component's loops, a room's
// unsubscribe, a gap fill, a coalesced mark), so Shutdown knows it is done.
type group struct {
	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
}

func newGroup() *group {
	g := &group{}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// Go runs fn on the group's context unless the group stopped; it reports
// whether fn was started.
func (g *group) Go(fn func(ctx context.Context)) bool {
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return false
	}
	g.wg.Add(1)
	ctx := g.ctx
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		fn(ctx)
	}()
	return true
}

// Stop cancels the group's context and waits for its goroutines, at most
// until ctx ends.
func (g *group) Stop(ctx context.Context) error {
	g.mu.Lock()
	g.stopped = true
	g.mu.Unlock()
	g.cancel()
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Every runs fn now and then every interval() until ctx ends, each run
// bounded by 5 s. interval is read again while waiting, so a shorter
// interval (seat.lease_seconds lowered) takes effect within half a second,
// not after the old, longer wait.
func Every(ctx context.Context, now func() time.Time, interval func() time.Duration, fn func(context.Context)) {
	for {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fn(fctx)
		cancel()
		last := now()
		for {
			left := max(interval(), 100*time.Millisecond) - now().Sub(last)
			if left <= 0 {
				break
			}
			if !sleep(ctx, min(left, 500*time.Millisecond)) {
				return
			}
		}
	}
}

// sleep waits d or until ctx ends; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
