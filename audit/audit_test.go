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

// TestRefusalsCannotEvictActions records three actions and then a flood of
// refusals (a read-only token trying to act): with both lists capped at
// Max, every action is still listed, with the newest refusals around it.
func TestRefusalsCannotEvictActionsBudget(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	rdb := r.NewClient(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	l := New(rdb, Config{Prefix: r.Prefix, Max: 50, Now: func() time.Time { return now }})
	for i := 1; i <= 3; i++ {
		now = now.Add(time.Second)
		require.NoError(t, l.Record(ctx, Entry{Actor: "admin abcd", Role: "admin", Action: "POST /moderation/ban", Target: fmt.Sprintf("u%d", i), Status: 200, Node: "n1"}))
	}
	for i := 0; i < 1000; i++ {
		now = now.Add(time.Millisecond)
		require.NoError(t, l.Record(ctx, Entry{Actor: "read 9f9f", Role: "read", Action: "PUT /settings/{key}", Status: 403, Node: "n1"}))
	}
	es, err := l.List(ctx, MaxList)
	require.NoError(t, err)
	var actions []string
	for _, e := range es {
		if !e.Refused() {
			actions = append(actions, e.Target)
		}
	}
	assert.Equal(t, []string{"u3", "u2", "u1"}, actions, "every action survives the refusals")
	assert.Len(t, es, 53, "50 refusals (their cap) and 3 actions")
	assert.Equal(t, 403, es[0].Status, "newest first: the latest refusal")
	assert.Equal(t, "u3", es[50].Target, "the actions come after the newer refusals")
	n, err := rdb.LLen(ctx, refusedKey(keyspace.New(r.Prefix))).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(50), n, "refusals are capped on their own")
}

// TestServerAPIEntriesCannotEvictAdminEntries: a backend's keys calling
// many times (actions and refusals) fill a list of their own; every admin
// action and refusal survives, and List merges the three by time.
func TestServerAPIEntriesCannotEvictAdminEntries(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	rdb := r.NewClient(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC)
	l := New(rdb, Config{Prefix: r.Prefix, Max: 20, Now: func() time.Time { return now }})
	record := func(e Entry) {
		t.Helper()
		now = now.Add(time.Millisecond)
		require.NoError(t, l.Record(ctx, e))
	}
	record(Entry{Actor: "admin abcd", Role: "admin", Action: "POST /moderation/ban", Target: "u1", Status: 200, Node: "n1"})
	record(Entry{Actor: "read 9f9f", Role: "read", Action: "PUT /settings/{key}", Status: 403, Node: "n1"})
	for i := 0; i < 500; i++ {
		status := 200
		if i%5 == 0 {
			status = 429
		}
		record(Entry{Actor: "key game", Role: RoleServer, Action: "POST /server/rooms/{room}/messages", Target: "duel-1", Status: status, Node: "n2"})
	}
	record(Entry{Actor: "admin abcd", Role: "admin", Action: "POST /moderation/ban", Target: "u2", Status: 200, Node: "n1"})
	es, err := l.List(ctx, MaxList)
	require.NoError(t, err)
	require.Len(t, es, 23, "20 of the keys' (their cap), 2 admin actions, 1 refusal")
	assert.Equal(t, "u2", es[0].Target, "newest first")
	var admin []string
	for _, e := range es {
		if e.Role != RoleServer {
			admin = append(admin, e.Actor+" "+e.Target)
		}
	}
	assert.Equal(t, []string{"admin abcd u2", "read 9f9f ", "admin abcd u1"}, admin)
	n, err := rdb.LLen(ctx, serverKey(keyspace.New(r.Prefix))).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(20), n)
}
