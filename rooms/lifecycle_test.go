package rooms

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/lock"
)

// seatCalls counts the seat scripts (claim and creation) a client runs.
type seatCalls struct{ n atomic.Int64 }

func (c *seatCalls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *seatCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); len(a) > 1 && strings.HasPrefix(cmd.Name(), "eval") {
			if sha, _ := a[1].(string); sha == seatClaimScript.Hash() || sha == roomCreateScript.Hash() {
				c.n.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}
func (c *seatCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// stalledLobby joins u0 to lobby on s, holding its room creation in
// beforeCreate until the returned release is called, then queues n more
// joins behind it and waits until they are all queued (or, on a Service
// not started, running). It returns the joins' results, u0's first.
func stalledLobby(t *testing.T, s *Service, lobby string, n int, queued bool) (release func(), results <-chan error) {
	t.Helper()
	ctx := context.Background()
	holding, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	prev := s.Seats.beforeCreate
	s.Seats.beforeCreate = func(ctx context.Context, l *lock.Lock) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(holding)
			<-proceed
		} else if prev != nil {
			prev(ctx, l)
		}
	}
	out := make(chan error, n+1)
	go func() {
		_, err := s.Seats.Join(ctx, lobby, "u0", ws1)
		out <- err
	}()
	<-holding
	var started sync.WaitGroup
	for i := 1; i <= n; i++ {
		started.Add(1)
		go func() {
			started.Done()
			_, err := s.Seats.Join(ctx, lobby, fmt.Sprintf("u%d", i), ws1)
			out <- err
		}()
	}
	started.Wait()
	if queued {
		require.Eventually(t, func() bool {
			s.Seats.joins.mu.Lock()
			defer s.Seats.joins.mu.Unlock()
			q := s.Seats.joins.queues[lobby]
			return q != nil && len(q.pending) == n
		}, 10*time.Second, time.Millisecond, "every join is queued behind u0's")
	}
	return func() { close(proceed) }, out
}

func TestGroupCommitRunsUnderTheStartedService(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()

	t.Run("started: the queued joins are seated by a drain in one batch", func(t *testing.T) {
		s := nodes(t, r, 1, Config{})[0]
		calls := &seatCalls{}
		s.Seats.rdb.AddHook(calls)
		release, out := stalledLobby(t, s, "gc", 60, true)
		before := calls.n.Load() // u0's claim and its creation, held
		release()
		for range 61 {
			require.NoError(t, <-out)
		}
		assert.LessOrEqual(t, calls.n.Load()-before, int64(3), "one claim for the 60 queued, one creation for the 11 over room 1")
		rooms, seats := checkLobby(t, r, "gc", DefaultCapacity)
		assert.Equal(t, [2]int{2, 61}, [2]int{rooms, seats})
	})

	t.Run("not started: every join runs its own scripts", func(t *testing.T) {
		s, err := New(r.NewClient(t), Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		calls := &seatCalls{}
		s.Seats.rdb.AddHook(calls)
		release, out := stalledLobby(t, s, "inline", 60, false)
		release()
		for range 61 {
			require.NoError(t, <-out)
		}
		assert.GreaterOrEqual(t, calls.n.Load(), int64(60))
		s.Seats.joins.mu.Lock()
		assert.Empty(t, s.Seats.joins.queues, "nothing was queued")
		s.Seats.joins.mu.Unlock()
		_, err = s.Seats.Join(ctx, "inline", "late", ws1)
		require.NoError(t, err)
	})
}

func TestCloseWaitsForTheDrains(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	// drainHeld makes the drain's room creation (the second creation of the
	// lobby: u0's is the first) wait for proceed, or for its context's end.
	drainHeld := func(s *Service) (holding <-chan struct{}, proceed chan struct{}) {
		h, p := make(chan struct{}), make(chan struct{})
		var once sync.Once
		s.Seats.beforeCreate = func(ctx context.Context, _ *lock.Lock) {
			once.Do(func() {
				close(h)
				select {
				case <-p:
				case <-ctx.Done():
				}
			})
		}
		return h, p
	}
	queueGone := func(s *Service, lobby string) bool {
		s.Seats.joins.mu.Lock()
		defer s.Seats.joins.mu.Unlock()
		return s.Seats.joins.queues[lobby] == nil
	}

	t.Run("Close lets a running drain finish its batch", func(t *testing.T) {
		s := nodes(t, r, 1, Config{})[0]
		holding, proceed := drainHeld(s)
		release, out := stalledLobby(t, s, "close", 60, true)
		release()
		<-holding // the drain is in its batch
		closed := make(chan error, 1)
		go func() { closed <- s.Seats.Close(ctx) }()
		require.Eventually(t, func() bool { s.Seats.joins.mu.Lock(); defer s.Seats.joins.mu.Unlock(); return s.Seats.joins.closing }, 10*time.Second, time.Millisecond)
		select {
		case err := <-closed:
			t.Fatalf("Close returned (%v) while its drain was running", err)
		default:
		}
		close(proceed)
		require.NoError(t, <-closed)
		assert.True(t, queueGone(s, "close"), "the drain had ended when Close returned")
		for range 61 {
			require.NoError(t, <-out)
		}

		t.Run("then joins run inline, and the Service starts again", func(t *testing.T) {
			_, err := s.Seats.Join(ctx, "close", "late", ws1)
			require.NoError(t, err)
			require.NoError(t, s.Seats.Start(ctx))
			assert.ErrorIs(t, s.Seats.Start(ctx), ErrStarted)
		})
	})

	t.Run("Close cancels a drain that outlives its context", func(t *testing.T) {
		s := nodes(t, r, 1, Config{})[0]
		holding, _ := drainHeld(s)
		release, out := stalledLobby(t, s, "cancel", 60, true)
		release()
		<-holding
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		err := s.Seats.Close(cctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.True(t, queueGone(s, "cancel"), "the cancelled drain had returned when Close did")
		ok, failed := 0, 0
		for range 61 {
			if err := <-out; err == nil {
				ok++
			} else {
				assert.True(t, errors.Is(err, context.Canceled), "%v", err)
				failed++
			}
		}
		assert.Equal(t, 50, ok, "u0 and the 49 that fit room 1")
		assert.Equal(t, 11, failed, "the joins waiting for room 2")
	})

	t.Run("Close of a Service never started is nil", func(t *testing.T) {
		s, err := New(r.Client, Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		assert.NoError(t, s.Seats.Close(ctx))
	})
}
