package shop

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

func TestKeyedGrantIsAppliedOnce(t *testing.T) {
	t.Parallel()
	redistest.Each(t, []redistest.Backend{{Name: "single server", Start: redistest.New}, {Name: "cluster", Start: redistest.Cluster}},
		func(t *testing.T, r *redistest.Redis) {
			ctx := context.Background()
			ss := nodes(t, r, 2, Config{})
			balance := func(user string) int64 {
				w, err := ss[0].Wallet(ctx, user)
				require.NoError(t, err)
				return w.Balance
			}

			t.Run("a repeat answers the first balance and grants nothing", func(t *testing.T) {
				b, err := ss[0].GrantWith(ctx, "ann", 100, "order-1")
				require.NoError(t, err)
				assert.EqualValues(t, 100, b)
				b, err = ss[0].Grant(ctx, "ann", 5) // another grant between
				require.NoError(t, err)
				assert.EqualValues(t, 105, b)
				b, err = ss[1].GrantWith(ctx, "ann", 100, "order-1")
				require.NoError(t, err)
				assert.EqualValues(t, 100, b, "the first answer")
				assert.EqualValues(t, 105, balance("ann"))
			})

			t.Run("the key is per user, and bound to its amount", func(t *testing.T) {
				b, err := ss[0].GrantWith(ctx, "bob", 100, "order-1")
				require.NoError(t, err)
				assert.EqualValues(t, 100, b, "bob's order-1 is not ann's")
				_, err = ss[0].GrantWith(ctx, "bob", 99, "order-1")
				assert.ErrorIs(t, err, ErrIdempotencyMismatch)
				assert.EqualValues(t, 100, balance("bob"))
			})

			t.Run("concurrent grants with one key grant once", func(t *testing.T) {
				var wg sync.WaitGroup
				for i := range 8 {
					wg.Go(func() {
						b, err := ss[i%2].GrantWith(ctx, "cy", 7, "race")
						assert.NoError(t, err)
						assert.EqualValues(t, 7, b)
					})
				}
				wg.Wait()
				assert.EqualValues(t, 7, balance("cy"))
			})

			t.Run("bad keys are refused", func(t *testing.T) {
				for _, k := range []string{"has space", "tab\t", string(make([]byte, MaxIdempotencyKey+1))} {
					_, err := ss[0].GrantWith(ctx, "dee", 1, k)
					assert.ErrorIs(t, err, ErrBadIdempotencyKey, "%q", k)
				}
				assert.Zero(t, balance("dee"))
			})
		})
}

// TestKeyedGrantSurvivesALostAnswer: Redis stops (SIGSTOP) while a grant's
// EXEC is on the wire, longer than the client's read timeout. The grant
// answers an error, but Redis applies it when it wakes: a timeout does not
// mean the write did not happen. The caller's retry with the same key is
// answered the first grant's balance and grants nothing; the coins are
// there once, and the wallet is marked for REST polls by the retry (the
// lost call never marked it).
func TestKeyedGrantSurvivesALostAnswer(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addrs[0], MaxRetries: 1, ReadTimeout: 500 * time.Millisecond,
		MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 10 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	var marks atomic.Int64 // the wallet's marks for REST polls
	s := New(rdb, Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry(),
		OnWalletChange: func(context.Context, string) { marks.Add(1) }})
	_, err := s.Grant(ctx, "eve", 1) // a connection and a wallet
	require.NoError(t, err)

	var wg sync.WaitGroup
	var first error
	r.Server.Pause(t)
	wg.Go(func() { _, first = s.GrantWith(ctx, "eve", 50, "topup-9") })
	time.Sleep(1200 * time.Millisecond)
	r.Server.Resume(t)
	wg.Wait()
	var nerr interface{ Timeout() bool }
	require.Error(t, first, "the answer was lost")
	require.True(t, errors.As(first, &nerr) && nerr.Timeout(), "a timeout: %v", first)

	b, err := s.GrantWith(ctx, "eve", 50, "topup-9")
	require.NoError(t, err)
	assert.EqualValues(t, 51, b, "the retry answers the grant Redis applied")
	w, err := s.Wallet(ctx, "eve")
	require.NoError(t, err)
	assert.EqualValues(t, 51, w.Balance, "granted once")
	assert.EqualValues(t, 2, marks.Load(), "the retry marks the grant whose answer was lost")
}
