package audit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

func TestLog(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	rdb := r.NewClient(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	l := New(rdb, Config{Prefix: r.Prefix, Max: 3, TTL: time.Hour, Now: func() time.Time { return now }})
	key := logKey(keyspace.New(r.Prefix))

	t.Run("an entry without actor or action is refused", func(t *testing.T) {
		assert.ErrorIs(t, l.Record(ctx, Entry{Action: "POST /x"}), ErrBadEntry)
		assert.ErrorIs(t, l.Record(ctx, Entry{Actor: "admin 1"}), ErrBadEntry)
	})

	t.Run("entries come back newest first, stamped, capped at Max, with a TTL", func(t *testing.T) {
		for i := 1; i <= 5; i++ {
			now = now.Add(time.Second)
			require.NoError(t, l.Record(ctx, Entry{Actor: "admin abcd", Role: "admin", Action: "POST /moderation/mute",
				Target: fmt.Sprintf("u%d", i), Status: 200, Node: "n1"}))
		}
		es, err := l.List(ctx, 10)
		require.NoError(t, err)
		require.Len(t, es, 3, "only the newest Max are kept")
		assert.Equal(t, []string{"u5", "u4", "u3"}, []string{es[0].Target, es[1].Target, es[2].Target})
		assert.Equal(t, now, es[0].At)
		assert.Equal(t, Entry{At: now, Actor: "admin abcd", Role: "admin", Action: "POST /moderation/mute", Target: "u5", Status: 200, Node: "n1"}, es[0])
		ttl, err := rdb.PTTL(ctx, key).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 59*time.Minute, "the log carries its TTL")
		assert.LessOrEqual(t, ttl, time.Hour)

		es, err = l.List(ctx, 1)
		require.NoError(t, err)
		assert.Len(t, es, 1, "limit is honoured")
	})
}
