package moderation

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

var servers = []struct {
	name string
	get  func(testing.TB) *redistest.Redis
}{
	{"redis-server", redistest.Real},
	{"cluster", redistest.Cluster},
}

// counter counts the commands and pipelines a client sends.
type counter struct{ cmds, pipes atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.pipes.Add(1)
		return next(ctx, cmds)
	}
}

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// clock is a settable clock.
type clock struct{ ms atomic.Int64 }

func (c *clock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) Advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

func TestModeration(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			testModeration(t, srv.get(t))
		})
	}
}

func testModeration(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	clk := &clock{}
	clk.ms.Store(time.Now().UnixMilli())
	var logs syncBuffer
	cfg := Config{Prefix: r.Prefix, Now: clk.Now, Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	admin := New(r.NewClient(t), cfg)
	node := New(r.NewClient(t), cfg) // another chatd node

	ps := r.NewClient(t).Subscribe(ctx, node.Channel())
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(ctx)
	require.NoError(t, err)
	events := ps.Channel()
	next := func() Event {
		t.Helper()
		select {
		case m := <-events:
			e, err := DecodeEvent([]byte(m.Payload))
			require.NoError(t, err)
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event within 10s")
			return Event{}
		}
	}
	check := func(user string) Status {
		t.Helper()
		st, err := node.Check(ctx, user)
		require.NoError(t, err)
		return st
	}

	t.Run("a mute is in force on every node until lifted, and published", func(t *testing.T) {
		until, err := admin.Mute(ctx, "alice", time.Hour, "flood")
		require.NoError(t, err)
		assert.Equal(t, clk.Now().Add(time.Hour).UTC().Truncate(time.Millisecond), until)
		assert.Equal(t, Event{Type: "mute", User: "alice", Until: until, Reason: "flood"}, next())
		assert.Equal(t, Status{Muted: true, MuteUntil: until, Reason: "flood"}, check("alice"))
		assert.Equal(t, Status{}, check("bob"))
		require.NoError(t, admin.Unmute(ctx, "alice"))
		assert.Equal(t, Event{Type: "unmute", User: "alice"}, next())
		assert.Equal(t, Status{}, check("alice"))
	})

	t.Run("a ban is published with its end; its reason wins over a mute's", func(t *testing.T) {
		mu, err := admin.Mute(ctx, "carl", time.Hour, "caps")
		require.NoError(t, err)
		next()
		bu, err := admin.Ban(ctx, "carl", 2*time.Hour, "spam")
		require.NoError(t, err)
		assert.Equal(t, Event{Type: "ban", User: "carl", Until: bu, Reason: "spam"}, next())
		assert.Equal(t, Status{Muted: true, Banned: true, MuteUntil: mu, BanUntil: bu, Reason: "spam"}, check("carl"))
		require.NoError(t, admin.Unban(ctx, "carl"))
		assert.Equal(t, Event{Type: "unban", User: "carl"}, next())
		assert.Equal(t, Status{Muted: true, MuteUntil: mu, Reason: "caps"}, check("carl"))
		require.NoError(t, admin.Unmute(ctx, "carl"))
		next()
	})

	t.Run("a kick is published only", func(t *testing.T) {
		require.NoError(t, admin.Kick(ctx, "dora", "calm down"))
		assert.Equal(t, Event{Type: "kick", User: "dora", Reason: "calm down"}, next())
		assert.Equal(t, Status{}, check("dora"))
	})

	t.Run("the TTL lifts a mute by itself", func(t *testing.T) {
		_, err := admin.Mute(ctx, "erin", time.Second, "")
		require.NoError(t, err)
		next()
		start := time.Now()
		assert.True(t, check("erin").Muted)
		deadline := start.Add(15 * time.Second)
		for check("erin").Muted {
			require.True(t, time.Now().Before(deadline), "the mute outlived its TTL by 14s")
			time.Sleep(100 * time.Millisecond)
		}
		clk.Advance(time.Since(start) + time.Second) // the test's clock follows
	})

	t.Run("List shows the current ones, soonest end first, and trims the ended", func(t *testing.T) {
		m1, err := admin.Mute(ctx, "fred", 2*time.Hour, "a")
		require.NoError(t, err)
		m2, err := admin.Mute(ctx, "gina", time.Hour, "b")
		require.NoError(t, err)
		b1, err := admin.Ban(ctx, "hank", 3*time.Hour, "c")
		require.NoError(t, err)
		mutes, bans, err := node.List(ctx)
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"gina", m2, "b"}, {"fred", m1, "a"}}, mutes)
		assert.Equal(t, []Entry{{"hank", b1, "c"}}, bans)

		clk.Advance(90 * time.Minute) // gina's mute has ended (by this clock)
		mutes, bans, err = node.List(ctx)
		require.NoError(t, err)
		assert.Equal(t, []Entry{{"fred", m1, "a"}}, mutes)
		assert.Len(t, bans, 1)
		ks := keyspace.New(r.Prefix)
		assert.EqualValues(t, 1, r.Client.ZCard(ctx, indexKey(ks, "mute")).Val(), "trimmed from the index")
		assert.EqualValues(t, 1, r.Client.HLen(ctx, reasonsKey(ks, "mute")).Val(), "and its reason")

		require.NoError(t, admin.Unban(ctx, "hank"))
		_, bans, err = node.List(ctx)
		require.NoError(t, err)
		assert.Empty(t, bans, "lifted at once")
		for range 4 {
			next()
		}
	})

	t.Run("Check is one command", func(t *testing.T) {
		c := New(r.NewClient(t), cfg)
		_, err := c.Check(ctx, "fred") // dials: the handshake is not Check's
		require.NoError(t, err)
		cnt := &counter{}
		c.rdb.AddHook(cnt)
		_, err = c.Check(ctx, "fred")
		require.NoError(t, err)
		assert.EqualValues(t, 1, cnt.cmds.Load())
		assert.Zero(t, cnt.pipes.Load())
	})

	t.Run("every admin action is in the audit log", func(t *testing.T) {
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(l), &m))
			lines = append(lines, m)
		}
		require.NotEmpty(t, lines)
		first := lines[0]
		assert.Equal(t, "mute", first["action"])
		assert.Equal(t, "alice", first["user"])
		assert.EqualValues(t, 3600, first["seconds"])
		assert.Equal(t, "flood", first["reason"])
		actions := map[string]bool{}
		for _, l := range lines {
			actions[l["action"].(string)] = true
		}
		assert.Equal(t, map[string]bool{"mute": true, "unmute": true, "ban": true, "unban": true, "kick": true}, actions)
	})
}

func TestValidation(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := New(r.Client, Config{Prefix: r.Prefix, Logger: slog.New(slog.DiscardHandler)})
	for _, d := range []time.Duration{0, -time.Second, 999 * time.Millisecond, MaxDuration + time.Second} {
		_, err := s.Mute(ctx, "alice", d, "")
		assert.ErrorIs(t, err, ErrBadDuration, d)
		_, err = s.Ban(ctx, "alice", d, "")
		assert.ErrorIs(t, err, ErrBadDuration, d)
	}
	for _, d := range []time.Duration{time.Second, 31536000 * time.Second} {
		_, err := s.Mute(ctx, "alice", d, "")
		assert.NoError(t, err, d)
	}
	_, err := s.Mute(ctx, "a b", time.Minute, "")
	assert.ErrorIs(t, err, names.ErrBadName)
	_, err = s.Ban(ctx, "alice", time.Minute, strings.Repeat("x", MaxReason+1))
	assert.ErrorIs(t, err, ErrBadReason)
	assert.ErrorIs(t, s.Kick(ctx, "alice", "\xff"), ErrBadReason)
	assert.ErrorIs(t, s.Kick(ctx, "", ""), names.ErrBadName)
	assert.ErrorIs(t, s.Unmute(ctx, "x/y"), names.ErrBadName)
	assert.ErrorIs(t, s.Unban(ctx, "x/y"), names.ErrBadName)
	_, err = s.Check(ctx, "x/y")
	assert.ErrorIs(t, err, names.ErrBadName)
}

func TestDecodeEvent(t *testing.T) {
	e := Event{Type: "ban", User: "bob", Until: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), Reason: "spam"}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"ban","user":"bob","until":"2026-12-01T12:00:00Z","reason":"spam"}`, string(b))
	got, err := DecodeEvent(b)
	require.NoError(t, err)
	assert.Equal(t, e, got)
	b, err = json.Marshal(Event{Type: "unban", User: "bob"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"unban","user":"bob"}`, string(b))
	for _, bad := range []string{`nope`, `{"type":"hug","user":"bob"}`, `{"type":"kick","user":"b b"}`, `{"type":"kick"}`} {
		_, err := DecodeEvent([]byte(bad))
		assert.ErrorIs(t, err, ErrBadEvent, bad)
	}
}

func TestKeys(t *testing.T) {
	ks := keyspace.New("p")
	assert.Equal(t, "p:{mod:alice}:mute", muteKey(ks, "alice"))
	assert.Equal(t, "p:{mod:alice}:ban", banKey(ks, "alice"))
	assert.Equal(t, "p:{mods:all}:mute", indexKey(ks, "mute"))
	assert.Equal(t, "p:{mods:all}:ban-reasons", reasonsKey(ks, "ban"))
	assert.Equal(t, "p:moderation:events", eventsChannel(ks))
	assert.Equal(t, keyspace.Slot(muteKey(ks, "alice")), keyspace.Slot(banKey(ks, "alice")), "Check's MGET is one slot")
	assert.Equal(t, keyspace.Slot(indexKey(ks, "mute")), keyspace.Slot(reasonsKey(ks, "ban")), "List's script is one slot")
}

// TestSanctionsIgnoreCase reproduces issue #28 (6) for moderation: on the
// code before this change a ban of "bob" did not ban "Bob".
func TestSanctionsIgnoreCase(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := New(r.Client, Config{Prefix: r.Prefix, Logger: slog.New(slog.DiscardHandler)})
	ps := r.NewClient(t).Subscribe(ctx, s.Channel())
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(ctx)
	require.NoError(t, err)

	until, err := s.Ban(ctx, "bob", time.Hour, "spam")
	require.NoError(t, err)
	for _, u := range []string{"bob", "Bob", "BOB"} {
		st, err := s.Check(ctx, u)
		require.NoError(t, err)
		assert.True(t, st.Banned, u)
	}
	_, err = s.Mute(ctx, "ALICE", time.Hour, "caps")
	require.NoError(t, err)
	st, err := s.Check(ctx, "alice")
	require.NoError(t, err)
	assert.True(t, st.Muted)
	mutes, bans, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Entry{{"bob", until, "spam"}}, bans)
	require.Len(t, mutes, 1)
	assert.Equal(t, "alice", mutes[0].User, "listed by canonical name")

	m, err := ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	e, err := DecodeEvent([]byte(m.Payload))
	require.NoError(t, err)
	assert.Equal(t, "bob", e.User)
	m, err = ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Contains(t, m.Payload, `"user":"alice"`, "the event carries the canonical name")

	require.NoError(t, s.Unban(ctx, "BoB"))
	st, err = s.Check(ctx, "Bob")
	require.NoError(t, err)
	assert.False(t, st.Banned, "lifted in any case")
	require.NoError(t, s.Kick(ctx, "Carol", ""))
	m, err = ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Contains(t, m.Payload, `"type":"unban","user":"bob"`)
	m, err = ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	assert.Contains(t, m.Payload, `"user":"carol"`)

	e, err = DecodeEvent([]byte(`{"type":"kick","user":"Dora"}`))
	require.NoError(t, err)
	assert.Equal(t, "dora", e.User, "decoded in canonical form")
	assert.Equal(t, errcode.BadRequest, errcode.Of(ErrBadDuration))
	assert.Equal(t, errcode.BadRequest, errcode.Of(ErrBadReason))
}
