package notices

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// callCommands are the commands a post sends: the script (EVAL after NOSCRIPT).
var callCommands = []string{"evalsha", "eval"}

// TestRetriedPostPostsOnce: go-redis sends a call again when its reply does
// not come in time, and the first copy may have run. A retried post stored
// the notice twice and broadcast it twice to everyone. The retry must
// answer the first copy's id and store and publish nothing, even after
// another post made between the copies; the call's context must end 10 s
// (redisx.CallBound) after it started at the latest, and its record must carry
// the prefix and a TTL of at most 30 s (redisx.CallRecordTTL).
func TestRetriedPostPostsOnce(t *testing.T) {
	t.Parallel()
	backends := []redistest.Backend{{Name: "single server", Start: redistest.New}, {Name: "cluster", Start: redistest.Cluster}}
	redistest.Each(t, backends, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		h := redistest.ResendCommands(callCommands...)
		rdb := h.Client(t, r)
		b := New(rdb, Config{Prefix: r.Prefix})
		other := New(r.Client, Config{Prefix: r.Prefix})
		sub := r.NewClient(t).Subscribe(ctx, b.Channel())
		defer sub.Close()
		_, err := sub.Receive(ctx)
		require.NoError(t, err)

		var meanwhile Notice
		h.Arm(func() {
			var err error
			meanwhile, err = other.Post(ctx, "meanwhile")
			require.NoError(t, err)
		})
		n, err := b.Post(ctx, "maintenance at 10:00")
		require.NoError(t, err)
		end := time.Now()
		cmd, deadline := h.Resent(t)

		recent, err := b.Recent(ctx, 0)
		require.NoError(t, err)
		var ids, texts []string
		for _, x := range recent {
			ids, texts = append(ids, x.ID), append(texts, x.Text)
		}
		assert.Equal(t, []string{"maintenance at 10:00", "meanwhile"}, texts, "stored once")
		assert.Equal(t, []string{n.ID, meanwhile.ID}, ids, "the retry answers the first copy's id")

		var published []string
		for {
			msg, err := sub.ReceiveTimeout(ctx, 500*time.Millisecond)
			if err != nil {
				break // nothing more within 500 ms
			}
			m, ok := msg.(*redis.Message)
			require.True(t, ok, "%T", msg)
			ev, err := DecodeEvent([]byte(m.Payload))
			require.NoError(t, err)
			published = append(published, ev.ID)
		}
		assert.Equal(t, []string{n.ID, meanwhile.ID}, published, "published once")

		if assert.False(t, deadline.IsZero(), "the call's context has a deadline") {
			assert.False(t, deadline.After(end.Add(10*time.Second)), "no retry is sent after the record may have lapsed: deadline %v after the call", deadline.Sub(end))
		}
		args := cmd.Args()
		require.Contains(t, []string{"evalsha", "eval"}, cmd.Name(), "the post script")
		require.Equal(t, 2, args[2], "KEYS: the stream and the call's record")
		record, _ := args[4].(string)
		assert.True(t, strings.HasPrefix(record, r.Prefix+":{notices:global}:posted:"), "record key %s", record)
		got, err := r.Client.Get(ctx, record).Result()
		require.NoError(t, err)
		assert.Equal(t, n.ID, got, "the record holds the notice's id")
		ttl, err := r.Client.PTTL(ctx, record).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, time.Duration(0))
		assert.LessOrEqual(t, ttl, 30*time.Second)
	})
}
