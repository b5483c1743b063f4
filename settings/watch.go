package settings

import (
	"context"
	"sync/atomic"
)

type watcher struct {
	key       string // "" = every key
	fn        func(Change)
	cancelled atomic.Bool
}

// Watch calls fn for every change of key applied to this Store from then on
// — from pub/sub, from a snapshot that found a different value, or from a
// Set on this node — or, with key "", for changes of every key. Calls come
// from one goroutine of the started Store, one at a time, each key's in
// increasing version; fn should return quickly (it delays later changes, not
// reads). Read the current value after Watch returns so that nothing falls
// between. cancel stops the calls (one already running finishes). Watch
// panics for a key not in the registry.
func (s *Store) Watch(key string, fn func(Change)) (cancel func()) {
	if key != "" {
		def(key)
	}
	w := &watcher{key: key, fn: fn}
	s.wmu.Lock()
	s.nextID++
	id := s.nextID
	s.watchers[id] = w
	s.wmu.Unlock()
	return func() {
		w.cancelled.Store(true)
		s.wmu.Lock()
		delete(s.watchers, id)
		s.wmu.Unlock()
	}
}

// enqueue queues c for the watchers. s.mu is held, so the queue is in the
// order changes were applied.
func (s *Store) enqueue(c Change) {
	s.wmu.Lock()
	s.queue = append(s.queue, c)
	s.wmu.Unlock()
	select {
	case s.queued <- struct{}{}:
	default:
	}
}

// dispatchLoop hands queued changes to the watchers until ctx ends.
func (s *Store) dispatchLoop(ctx context.Context) {
	defer s.done.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.queued:
		}
		s.wmu.Lock()
		batch := s.queue
		s.queue = nil
		ws := make([]*watcher, 0, len(s.watchers))
		for _, w := range s.watchers {
			ws = append(ws, w)
		}
		s.wmu.Unlock()
		for _, c := range batch {
			for _, w := range ws {
				if (w.key == "" || w.key == c.Key) && !w.cancelled.Load() {
					w.fn(c)
				}
			}
		}
	}
}
