package shop

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

func TestCounters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    func(testing.TB) *redistest.Redis
	}{{"single", redistest.New}, {"cluster", redistest.Cluster}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.r(t)
			ctx := context.Background()
			const nodes, each = 3, 50

			t.Run("concurrent INCRs on every node lose nothing", func(t *testing.T) {
				var wg sync.WaitGroup
				for range nodes {
					c := NewCounters(r.NewClient(t), r.Prefix)
					wg.Go(func() {
						for range each {
							_, err := c.Incr(ctx, "messages")
							assert.NoError(t, err)
						}
					})
				}
				wg.Wait()
				n, err := NewCounters(r.Client, r.Prefix).Incr(ctx, "rooms")
				require.NoError(t, err)
				assert.Equal(t, int64(1), n)
				got, err := NewCounters(r.Client, r.Prefix).Get(ctx, "messages", "rooms", "never")
				require.NoError(t, err)
				assert.Equal(t, map[string]int64{"messages": nodes * each, "rooms": 1, "never": 0}, got)
			})

			t.Run("bad names are refused", func(t *testing.T) {
				c := NewCounters(r.Client, r.Prefix)
				_, err := c.Incr(ctx, "a}b")
				assert.ErrorIs(t, err, names.ErrBadName)
				_, err = c.Get(ctx, "ok", "")
				assert.ErrorIs(t, err, names.ErrBadName)
				got, err := c.Get(ctx)
				require.NoError(t, err)
				assert.Empty(t, got)
			})
		})
	}
}
