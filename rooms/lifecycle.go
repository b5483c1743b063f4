package rooms

import (
	"context"

	"github.com/chatd/chatd/errcode"
)

// ErrStarted is returned by Start for a Service already started.
var ErrStarted = errcode.New(errcode.Internal, "rooms: service already started")

// Start starts the Service's background work under ctx: the drains that
// seat the joins queued behind one in progress (Join's group commit). The
// work ends when ctx ends or Close is called; Close waits for it. Without
// Start every join is seated inline, one script call or more each. The
// sweeper is separate (RunSweeper). Start returns ErrStarted when the
// Service runs already; a Service that was closed may be started again.
func (s *Service) Start(ctx context.Context) error {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.runCtx != nil {
		return ErrStarted
	}
	s.runCtx, s.stop = context.WithCancel(ctx)
	return nil
}

// Close stops the Service's background work: no new drain starts (joins
// from now on run inline), and the running drains finish the batches they
// hold — Close waits for them until ctx ends, then cancels them (their
// joins fail with the context's error; a join may still have been seated)
// and waits for them to return. It returns ctx's error when it had to
// cancel, else nil; nil too for a Service that was not started.
func (s *Service) Close(ctx context.Context) error {
	s.qmu.Lock()
	if s.runCtx == nil || s.closing {
		s.qmu.Unlock()
		return nil
	}
	s.closing = true
	stop := s.stop
	s.qmu.Unlock()

	done := make(chan struct{})
	go func() { // ends when the drains do, which the cancel below forces
		s.drains.Wait()
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
	s.qmu.Lock()
	s.runCtx, s.stop, s.closing = nil, nil, false
	s.qmu.Unlock()
	return err
}
