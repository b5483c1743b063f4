package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// guestBudgetBytes is what an abandoned guest may leave in Redis, and
// guestBudgetTTL how long any of it may live (docs/PROTOCOL.md, "What a
// guest leaves").
const (
	guestBudgetBytes = 8 << 10
	guestBudgetTTL   = 24 * time.Hour
)

// TestAbandonedGuestFootprintBudget: a guest does everything a guest can
// over REST (sign in, join, say, read mark, poll, 50 seen items, a score on
// a board it creates, which makes it follow that board), then either walks
// away without signing out or signs out. Every key that names the guest
// or its board is read with MEMORY USAGE and PTTL: together they hold at
// most 8 KiB, and none lives longer than 24 h (none without a TTL).
func TestAbandonedGuestFootprintBudget(t *testing.T) {
	for _, signOut := range []bool{false, true} {
		name := "abandoned"
		if signOut {
			name = "signed out"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := redistest.Real(t)
			c := newCluster(t, r, 1)
			n := c.nodes[0]
			ctx := context.Background()
			user, board := "ghost-guest", "ghost-board"
			tok := c.session(n, user)
			room := c.join(n, tok, "ghost-lobby").ID
			msg := c.say(n, tok, room, "hello")
			require.Equal(t, 200, c.do(n, "POST", "/api/v1/rooms/"+room+"/read", tok, map[string]string{"id": msg.ID}, nil))
			require.Equal(t, 200, c.do(n, "GET", "/api/v1/poll?wait=0", tok, nil, nil))
			items := make([]string, 50)
			for i := range items {
				items[i] = fmt.Sprintf("item-%d", i)
			}
			require.Equal(t, 200, c.do(n, "POST", "/api/v1/seen", tok, map[string][]string{"items": items}, nil))
			require.Equal(t, 200, c.do(n, "POST", "/api/v1/leaderboards/"+board+"/scores", tok, map[string]any{"player": user, "score": 7}, nil))
			require.Equal(t, 200, c.do(n, "GET", "/api/v1/poll?wait=0", tok, nil, nil))
			if signOut {
				require.Equal(t, 200, c.do(n, "DELETE", "/api/v1/session", tok, nil, nil))
			}

			// the node's loops (presence renewal, marks) run at least once
			check := func(collect *assert.CollectT) {
				var keys []string
				iter := r.Client.Scan(ctx, 0, r.Prefix+":*", 1000).Iterator()
				for iter.Next(ctx) {
					k := iter.Val()
					if strings.Contains(k, user) || strings.Contains(k, board) {
						keys = append(keys, k)
					}
				}
				require.NoError(collect, iter.Err())
				var total int64
				var longest time.Duration
				var report strings.Builder
				for _, k := range keys {
					ttl, err := r.Client.PTTL(ctx, k).Result()
					require.NoError(collect, err)
					if ttl == -2 {
						continue
					}
					mem, err := r.Client.MemoryUsage(ctx, k, 0).Result()
					require.NoError(collect, err)
					total += mem
					longest = max(longest, ttl)
					fmt.Fprintf(&report, "  %s: %d B, PTTL %s\n", k, mem, ttl.Round(time.Second))
					assert.False(collect, ttl == -1, "%s has no TTL", k)
					assert.LessOrEqual(collect, ttl, guestBudgetTTL, "%s lives %s", k, ttl.Round(time.Second))
				}
				t.Logf("guest keys (%s): %d keys, %d B, longest TTL %s\n%s", name, len(keys), total, longest.Round(time.Second), report.String())
				assert.LessOrEqual(collect, total, int64(guestBudgetBytes), "the guest's keys hold %d B", total)
			}
			require.EventuallyWithT(t, check, 20*time.Second, 500*time.Millisecond)
		})
	}
}
