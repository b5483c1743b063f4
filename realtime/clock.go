package realtime

import (
	"context"
	"sync/atomic"
	"time"
)

// coarseClock is the time to within coarseTick, read without a system
// call: a client's Send runs once per delivery, and the flow-control check
// it feeds works in seconds. The node owns its ticker (started with the
// node, stopped by Shutdown); a clock that is not running reads the time
// it was last set to, which only makes flow control more lenient.
type coarseClock struct {
	ns  atomic.Int64
	now func() time.Time
}

const coarseTick = 50 * time.Millisecond

func newCoarseClock(now func() time.Time) *coarseClock {
	c := &coarseClock{now: now}
	c.ns.Store(now().UnixNano())
	return c
}

// Now returns the time of the last tick.
func (c *coarseClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

// run ticks until ctx ends.
func (c *coarseClock) run(ctx context.Context) {
	t := time.NewTicker(coarseTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.ns.Store(c.now().UnixNano())
		}
	}
}
