package bus

import (
	"context"
	"time"
)

// Confirm reports whether the pub/sub connection receives: at once when a
// canary came back recently (Ready), else it publishes a canary now and
// waits, until ctx ends, for one to come back. A readiness probe asks this
// rather than Ready alone: on a loaded machine the periodic canary can be
// late without the connection being at fault, and a probe that answered
// "not receiving" then would take a working node out of its balancer.
func (b *Bus) Confirm(ctx context.Context) bool {
	if b.Ready() {
		return true
	}
	before := b.lastCanary.Load()
	b.publishCanary(ctx)
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if b.lastCanary.Load() != before {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
