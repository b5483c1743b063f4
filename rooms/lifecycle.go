package rooms

import (
	"context"

	"github.com/chatd/chatd/errcode"
)

// ErrStarted is returned by Start for Seats already started.
var ErrStarted = errcode.New(errcode.Internal, "rooms: service already started")

// Start starts the Seats' background work under ctx: the drains that
// seat the joins queued behind one in progress (Join's group commit). The
// work ends when ctx ends or Close is called; Close waits for it. Without
// Start every join is seated inline, one script call or more each. The
// sweeper is separate (RunSweeper). Start returns ErrStarted when the
// Seats run already; Seats that were closed may be started again.
func (s *Seats) Start(ctx context.Context) error { return s.joins.start(ctx) }

// Close stops the Seats' background work: no new drain starts (joins
// from now on run inline), and the running drains finish the batches they
// hold — Close waits for them until ctx ends, then cancels them (their
// joins fail with the context's error; a join may still have been seated)
// and waits for them to return. It returns ctx's error when it had to
// cancel, else nil; nil too for Seats that were not started.
func (s *Seats) Close(ctx context.Context) error { return s.joins.close(ctx) }

func (j *joinQueues) start(ctx context.Context) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.runCtx != nil {
		return ErrStarted
	}
	j.runCtx, j.stop = context.WithCancel(ctx)
	return nil
}

func (j *joinQueues) close(ctx context.Context) error {
	j.mu.Lock()
	if j.runCtx == nil || j.closing {
		j.mu.Unlock()
		return nil
	}
	j.closing = true
	stop := j.stop
	j.mu.Unlock()

	done := make(chan struct{})
	go func() { // ends when the drains do, which the cancel below forces
		j.drains.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		stop()
		<-done
	}
	stop()
	j.mu.Lock()
	j.runCtx, j.stop, j.closing = nil, nil, false
	j.mu.Unlock()
	return err
}
