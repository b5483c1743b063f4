package direct_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/internal/redistest"
)

var serverAndCluster = []redistest.Backend{{Name: "single server", Start: redistest.Real}, {Name: "cluster", Start: redistest.Cluster}}

// keysOf returns the keys that match pattern, on every master of a Cluster.
func keysOf(t *testing.T, rdb redis.UniversalClient, pattern string) []string {
	t.Helper()
	ctx := context.Background()
	c, ok := rdb.(*redis.ClusterClient)
	if !ok {
		keys, err := rdb.Keys(ctx, pattern).Result()
		require.NoError(t, err)
		return keys
	}
	var mu sync.Mutex
	var keys []string
	require.NoError(t, c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error {
		ks, err := n.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	}))
	return keys
}

// published collects the texts of the dm events on s's channel.
type published struct {
	ch <-chan *redis.Message
}

func subscribe(t *testing.T, r *redistest.Redis, s *direct.Service) published {
	t.Helper()
	sub := r.NewClient(t).Subscribe(context.Background(), s.Channel())
	t.Cleanup(func() { _ = sub.Close() })
	_, err := sub.Receive(context.Background()) // subscribed
	require.NoError(t, err)
	return published{ch: sub.Channel()}
}

// until returns the texts of the dm events published up to and including
// the one of text last.
func (p published) until(t *testing.T, last string) []string {
	t.Helper()
	var out []string
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-p.ch:
			_, frame, ok := direct.DecodeEnvelope([]byte(m.Payload))
			require.True(t, ok)
			var e struct{ Type, Text string }
			require.NoError(t, json.Unmarshal(frame, &e))
			if e.Type != direct.EventMessage {
				continue
			}
			out = append(out, e.Text)
			if e.Text == last {
				return out
			}
		case <-timeout:
			t.Fatalf("no event %q; got %q", last, out)
		}
	}
}

// TestDirectSendRetriedByTheRedisClientIsAppliedOnce: go-redis sends a
// script call again when its reply does not come in time (a stalled
// Redis, a node paused while it waited), and the first copy may have been
// applied, with other clients' writes in between. The second copy must
// answer the first one's result and change nothing: a send without an
// idempotency key was stored twice, counted unread twice, published twice
// and took two tokens; a keyed one was answered as a client's repeat
// (Repeated), so the caller skipped what follows a new message and told
// its client that its first send was a repeat.
func TestDirectSendRetriedByTheRedisClientIsAppliedOnce(t *testing.T) {
	t.Parallel()
	redistest.Each(t, serverAndCluster, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		cfg := direct.Config{Prefix: r.Prefix, Key: []byte("k")}
		other := direct.New(r.NewClient(t), cfg) // another node: no retries
		h := redistest.ResendScript("direct.message_send")
		rdb := h.Client(t, r)
		s := direct.New(rdb, cfg)
		conv, _, err := other.Open(ctx, "Alice", "bob", direct.OpenOptions{})
		require.NoError(t, err)
		events := subscribe(t, r, other)
		history := func() []string {
			page, err := other.History(ctx, conv, "", 100)
			require.NoError(t, err)
			var out []string
			for _, m := range page.Messages {
				out = append(out, m.Text)
			}
			return out
		}
		unread := func() int64 {
			list, err := other.List(ctx, "bob", 10)
			require.NoError(t, err)
			require.Len(t, list, 1)
			return list[0].Unread
		}

		t.Run("without a key, stored, counted, published and rated once", func(t *testing.T) {
			h.Always(func() {
				_, err := other.Send(ctx, conv, "Alice", "in between", direct.SendOptions{})
				require.NoError(t, err)
			})
			opt := direct.SendOptions{Rate: 0.001, Burst: 2}
			start := time.Now()
			sent, err := s.Send(ctx, conv, "Alice", "hi", opt)
			require.NoError(t, err)
			require.EqualValues(t, 2, h.Copies(), "the script was sent twice")
			end := time.Now()
			_, d := h.Resent(t)
			assert.False(t, d.IsZero(), "ctx has no deadline; the script call's has one")
			assert.WithinRange(t, d, start.Add(10*time.Second), end.Add(10*time.Second),
				"the script call ends 10 s after its start: no copy is sent once the call's key (30 s) may be gone")
			assert.False(t, sent.Repeated, "the call's own send, not a repeat")
			assert.EqualValues(t, 1, sent.Unread, "the first copy's answer")
			assert.Equal(t, []string{"hi", "in between"}, history(), "stored once")
			assert.EqualValues(t, 2, unread(), "counted once")
			_, err = other.Send(ctx, conv, "Alice", "next", opt)
			assert.NoError(t, err, "one token taken: the bucket of 2 has one left")
			assert.Equal(t, []string{"hi", "in between", "next"}, events.until(t, "next"), "published once")
		})

		t.Run("with a key, the call's own send; a client's repeat is Repeated", func(t *testing.T) {
			h.Always(nil)
			first, err := s.Send(ctx, conv, "Alice", "keyed", direct.SendOptions{Ref: "r1"})
			require.NoError(t, err)
			require.EqualValues(t, 4, h.Copies(), "the script was sent twice")
			assert.False(t, first.Repeated, "the retry of the call's own first send is no repeat")
			assert.EqualValues(t, 4, first.Unread)
			again, err := other.Send(ctx, conv, "alice", "keyed", direct.SendOptions{Ref: "r1"})
			require.NoError(t, err)
			assert.True(t, again.Repeated, "the client sent it again")
			assert.Equal(t, first.Message.ID, again.Message.ID)
			assert.Equal(t, []string{"hi", "in between", "next", "keyed"}, history())
			assert.EqualValues(t, 4, unread())
		})

		t.Run("a call's key lives redisx.CallRecordTTL", func(t *testing.T) {
			keys := keysOf(t, r.Client, r.Prefix+":*:said:*:~*")
			require.Len(t, keys, 3, "one per send without a key")
			for _, k := range keys {
				ttl, err := r.Client.PTTL(ctx, k).Result()
				require.NoError(t, err)
				assert.True(t, ttl > 0 && ttl <= 30*time.Second, "%s lives %v", k, ttl)
			}
		})
	})
}

// TestDirectOpenAndRemoveRetriedAnswerTheFirstCopy: the Redis client's
// retry of a late Open that made the conversation answered "existed", so
// its caller skipped the marks of a new conversation; that of a late
// Remove answered "no such message" for a message it had removed. Each
// now answers what its first copy did.
func TestDirectOpenAndRemoveRetriedAnswerTheFirstCopy(t *testing.T) {
	t.Parallel()
	redistest.Each(t, serverAndCluster, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		cfg := direct.Config{Prefix: r.Prefix, Key: []byte("k")}
		other := direct.New(r.NewClient(t), cfg)
		opens, removes := redistest.ResendScript("direct.conversation_open"), redistest.ResendScript("direct.message_remove")
		rdb := opens.Client(t, r)
		rdb.AddHook(removes)
		s := direct.New(rdb, cfg)

		t.Run("an open that made the conversation is answered created", func(t *testing.T) {
			opens.Arm(nil)
			_, created, err := s.Open(ctx, "Carol", "dave", direct.OpenOptions{})
			require.NoError(t, err)
			opens.Resent(t)
			assert.True(t, created)
			_, created, err = other.Open(ctx, "dave", "carol", direct.OpenOptions{})
			require.NoError(t, err)
			assert.False(t, created, "another call finds it existing")
		})

		t.Run("a removal is answered removed, once", func(t *testing.T) {
			conv, _, err := other.Open(ctx, "Erin", "frank", direct.OpenOptions{})
			require.NoError(t, err)
			sent, err := other.Send(ctx, conv, "Erin", "oops", direct.SendOptions{})
			require.NoError(t, err)
			removes.Arm(nil)
			removed, err := s.Remove(ctx, conv, sent.Message.ID)
			require.NoError(t, err)
			removes.Resent(t)
			assert.True(t, removed, "the retry answers the first copy's removal")
			removed, err = other.Remove(ctx, conv, sent.Message.ID)
			require.NoError(t, err)
			assert.False(t, removed, "another call finds it gone")
			rec := keysOf(t, r.Client, r.Prefix+":*:removed:*")
			require.Len(t, rec, 2, "one record per call")
			for _, k := range rec {
				ttl := r.Client.PTTL(ctx, k).Val()
				assert.True(t, ttl > 0 && ttl <= 30*time.Second, "%s lives %v", k, ttl)
			}
		})
	})
}
