package identity

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const wait = 10 * time.Second

// node is one simulated chatd node: its own client, bus and Registry, with
// the OnEnded calls it made.
type node struct {
	*Registry
	bus   *switchable
	ended chan claimant
}

// switchable is a node's real bus whose Ready a test can force to false,
// as when its pub/sub connection has silently stopped receiving.
type switchable struct {
	*bus.Bus
	down atomic.Bool
}

func (s *switchable) Ready() bool { return !s.down.Load() && s.Bus.Ready() }

// startNode starts a node on r with claim TTL ttl and clock now (nil:
// time.Now), and waits until its bus is Ready (its cache is in use).
func startNode(t *testing.T, r *redistest.Redis, ttl time.Duration, now func() time.Time) *node {
	t.Helper()
	c := r.NewClient(t)
	b := bus.New(c, bus.Config{Prefix: r.Prefix, Logger: quiet, CanaryEvery: 100 * time.Millisecond})
	t.Cleanup(b.Start(context.Background()))
	n := &node{bus: &switchable{Bus: b}, ended: make(chan claimant, 1000)}
	n.Registry = New(c, Config{Prefix: r.Prefix, TTL: fixed(ttl), Now: now, Logger: quiet,
		Registerer: prometheus.NewRegistry(),
		OnEnded:    func(name, holder string) { n.ended <- claimant{name, holder} },
	})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, n.Start(ctx, n.bus))
	t.Cleanup(func() { assert.NoError(t, n.Close(context.Background())) })
	require.Eventually(t, n.bus.Ready, wait, 10*time.Millisecond, "the bus receives its canary")
	return n
}

func startNodes(t *testing.T, r *redistest.Redis, ttl time.Duration, now func() time.Time) []*node {
	t.Helper()
	return []*node{startNode(t, r, ttl, now), startNode(t, r, ttl, now), startNode(t, r, ttl, now)}
}

// count reads one of a registry's call counters.
func count(t *testing.T, r *Registry, op, result string) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, r.m.calls.WithLabelValues(op, result).Write(&m))
	return m.GetCounter().GetValue()
}

// heard waits until n has received at least want events of type typ.
func (n *node) heard(t *testing.T, typ string, want float64) {
	t.Helper()
	require.Eventually(t, func() bool {
		var m dto.Metric
		require.NoError(t, n.m.events.WithLabelValues(typ).Write(&m))
		return m.GetCounter().GetValue() >= want
	}, wait, 5*time.Millisecond, "%s events", typ)
}

// endedWithin waits up to d for the node's OnEnded call for c, skipping
// others.
func (n *node) endedWithin(t *testing.T, d time.Duration, c claimant) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case got := <-n.ended:
			if got == c {
				return
			}
		case <-deadline:
			t.Fatalf("no OnEnded(%s, %s) within %v", c.user, c.holder, d)
		}
	}
}

// TestRestartEmptyKeepsEveryNameAndSession reproduces issue #28 (1): a
// Redis restarted without its data logged every guest out. On the code
// before this change, the first Touch of each guest after the restart
// answered ErrNotHolder ("this session has ended"), while a node whose
// throttle remembered the guest kept accepting the same token. Now every
// holder's next Admit succeeds on every node, and the nodes give the
// claims back before a stranger can take a name.
func TestRestartEmptyKeepsEveryNameAndSession(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{}) // no AOF: a restart is empty
	ctx := context.Background()
	nodes := startNodes(t, r, time.Hour, nil)
	guests := []string{"Misc1", "bob", "Carol", "dave_2", "erin-x", "Frank"}
	for i, g := range guests {
		require.NoError(t, nodes[i%3].Claim(ctx, g, "h-"+strings.ToLower(g)))
	}
	for _, n := range nodes {
		n.heard(t, EventClaimed, float64(len(guests))) // no event in flight: admits fill the cache
		for _, g := range guests {
			require.NoError(t, n.Admit(ctx, g, "h-"+strings.ToLower(g), hour()))
		}
	}
	// A guest claimed through a registry that no started node shares: no
	// node gives it back, so only its own next Admit can.
	lone := New(r.NewClient(t), Config{Prefix: r.Prefix, TTL: fixed(time.Hour)})
	require.NoError(t, lone.Claim(ctx, "solo", "h-solo"))
	renewed := make([]float64, len(nodes))
	for i, n := range nodes {
		renewed[i] = count(t, n.Registry, "admit", "renewed")
		require.NoError(t, n.Admit(ctx, "bob", "h-bob", hour()))
		assert.Equal(t, renewed[i], count(t, n.Registry, "admit", "renewed"), "node %d: answered from its cache", i)
	}

	runID := func() string {
		info, err := r.Client.Info(ctx, "server").Result()
		require.NoError(t, err)
		_, rest, _ := strings.Cut(info, "run_id:")
		id, _, _ := strings.Cut(rest, "\r\n")
		return id
	}
	before := runID()
	r.Server.Restart(t)
	require.NotEqual(t, before, runID(), "a new, empty server (no AOF)")
	for _, n := range nodes {
		// Until its bus notices (at most 3 canary periods), a node may
		// still answer from its cache: the window the package doc states.
		n.heard(t, "resubscribed", 1)
	}

	t.Run("the nodes give every claim back", func(t *testing.T) {
		require.Eventually(t, func() bool {
			for _, g := range guests {
				if h, _, err := lone.Holder(ctx, g); err != nil || h != "h-"+strings.ToLower(g) {
					return false
				}
			}
			return true
		}, wait, 20*time.Millisecond)
		for _, g := range guests {
			assert.ErrorIs(t, lone.Claim(ctx, strings.ToUpper(g), "stranger"), ErrNameTaken, g)
			assert.ErrorIs(t, lone.Claim(ctx, g, "stranger"), ErrNameTaken, g)
		}
	})
	t.Run("every holder's next Admit succeeds on every node, asking Redis", func(t *testing.T) {
		for i, n := range nodes {
			before := count(t, n.Registry, "admit", "renewed")
			for _, g := range guests {
				assert.NoError(t, n.Admit(ctx, g, "h-"+strings.ToLower(g), hour()), "node %d, %s", i, g)
			}
			assert.Equal(t, before+float64(len(guests)), count(t, n.Registry, "admit", "renewed"),
				"node %d: the resubscription dropped the cache", i)
		}
	})
	t.Run("a guest no node remembers takes its free name back on its next Admit", func(t *testing.T) {
		h, _, err := lone.Holder(ctx, "solo")
		require.NoError(t, err)
		require.Empty(t, h, "nobody gave it back")
		require.NoError(t, nodes[1].Admit(ctx, "solo", "h-solo", hour()))
		assert.ErrorIs(t, lone.Claim(ctx, "SOLO", "stranger"), ErrNameTaken)
		for _, n := range nodes {
			assert.NoError(t, n.Admit(ctx, "solo", "h-solo", hour()))
		}
	})
}

// TestSignOutReachesEveryNode reproduces issue #28 (2): A signs a guest
// out; B kept accepting the token from its Touch throttle for up to TTL/4
// (on the code before this change B's Touch returned nil here, the clock
// standing still). Now B refuses it as soon as the sign-out's event
// arrives, and calls OnEnded for it within a second.
func TestSignOutReachesEveryNode(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clk := newTestClock() // stands still: B's cache would never run out by itself
	nodes := startNodes(t, r, time.Hour, clk.Now)
	a, b := nodes[0], nodes[1]
	require.NoError(t, a.Claim(ctx, "Misc1", "h1"))
	b.heard(t, EventClaimed, 1)
	require.NoError(t, b.Admit(ctx, "Misc1", "h1", hour()))
	require.NoError(t, b.Admit(ctx, "Misc1", "h1", hour()))
	require.Equal(t, 1.0, count(t, b.Registry, "admit", "cached"), "B answers from its cache")

	start := time.Now()
	require.NoError(t, a.Release(ctx, "Misc1", "h1", hour()))
	for i, n := range nodes {
		n.endedWithin(t, time.Second, claimant{"misc1", "h1"})
		t.Logf("node %d: OnEnded %v after the release", i, time.Since(start).Round(time.Millisecond))
	}
	err := b.Admit(ctx, "MISC1", "h1", hour())
	assert.ErrorIs(t, err, ErrSignedOut)
	assert.Equal(t, 1.0, count(t, b.Registry, "admit", "signed_out_local"), "refused from what B heard, without Redis")

	t.Run("a new guest may claim the name through A; B refuses the old holder", func(t *testing.T) {
		require.NoError(t, a.Claim(ctx, "misc1", "h2"))
		assert.ErrorIs(t, b.Admit(ctx, "Misc1", "h1", hour()), ErrSignedOut)
		assert.NoError(t, b.Admit(ctx, "misc1", "h2", hour()))
	})
}

// TestTakeoverReachesEveryNode: a guest idle past the claim TTL loses the
// name to a new guest who claims it through A; B, which had the old holder
// in its cache, refuses it at once and calls OnEnded. On the code before
// this change B's throttle accepted the old token for up to TTL/4.
func TestTakeoverReachesEveryNode(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clk := newTestClock()
	nodes := startNodes(t, r, time.Hour, clk.Now)
	a, b := nodes[0], nodes[1]
	require.NoError(t, a.Claim(ctx, "alice", "h1"))
	b.heard(t, EventClaimed, 1)
	require.NoError(t, b.Admit(ctx, "alice", "h1", hour()))
	require.NoError(t, b.Admit(ctx, "alice", "h1", hour()))
	require.Equal(t, 1.0, count(t, b.Registry, "admit", "cached"))

	// The claim ran out (the guest was idle for the TTL) and a new guest
	// claimed the name.
	require.NoError(t, r.Client.Del(ctx, claimKey(keyspace.New(r.Prefix), "alice")).Err())
	require.NoError(t, a.Claim(ctx, "Alice", "h2"))
	b.endedWithin(t, time.Second, claimant{"alice", "h1"})
	assert.ErrorIs(t, b.Admit(ctx, "alice", "h1", hour()), ErrNotHolder)
	assert.NoError(t, b.Admit(ctx, "alice", "h2", hour()))
	assert.ErrorIs(t, nodes[2].Admit(ctx, "alice", "h1", hour()), ErrNotHolder)
}

// TestSignedOutStaysOutAfterEmptyRestart: a guest that signed out stays
// out after Redis restarts empty, on every node that heard the sign-out,
// and on a node started after the loss, which learns it from the
// revocations the others wrote back. (The code before this change passes
// the first half only because it never takes a free name back; a
// healing Admit without the revocation memory would let the signed-out
// token in again.)
func TestSignedOutStaysOutAfterEmptyRestart(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	nodes := startNodes(t, r, time.Hour, nil)
	require.NoError(t, nodes[0].Claim(ctx, "bob", "h-out"))
	require.NoError(t, nodes[1].Admit(ctx, "bob", "h-out", hour()))
	require.NoError(t, nodes[2].Claim(ctx, "carol", "h-in"))
	expires := hour()
	require.NoError(t, nodes[0].Release(ctx, "Bob", "h-out", expires))
	for _, n := range nodes {
		n.endedWithin(t, wait, claimant{"bob", "h-out"})
	}

	r.Server.Restart(t)
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			if count(t, n.Registry, "revoke", "revoked") < 1 {
				return false
			}
		}
		return true
	}, wait, 20*time.Millisecond, "every node wrote its revocation back")

	for i, n := range nodes {
		assert.ErrorIs(t, n.Admit(ctx, "bob", "h-out", hour()), ErrSignedOut, "node %d", i)
		assert.NoError(t, n.Admit(ctx, "carol", "h-in", hour()), "node %d", i)
	}
	score, err := r.Client.ZScore(ctx, revokedKey(keyspace.New(r.Prefix), "bob"), "h-out").Result()
	require.NoError(t, err)
	assert.Equal(t, float64(expires.UTC().Truncate(time.Millisecond).UnixMilli()), score)
	late := startNode(t, r, time.Hour, nil)
	assert.ErrorIs(t, late.Admit(ctx, "BOB", "h-out", hour()), ErrSignedOut, "a node started after the loss learns it from Redis")
	assert.Equal(t, 1.0, count(t, late.Registry, "admit", "signed_out"))
	require.NoError(t, late.Claim(ctx, "bob", "h-new"), "the name itself is free")
}

// TestNamesAreCaseInsensitive reproduces issue #28 (6): "Misc1", "MISC1"
// and "misc1" were three guests on the code before this change (the
// second Claim below succeeded). Now they are one name.
func TestNamesAreCaseInsensitive(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	reg := New(r.Client, Config{Prefix: r.Prefix})
	require.NoError(t, reg.Claim(ctx, "Misc1", "h1"))
	assert.ErrorIs(t, reg.Claim(ctx, "MISC1", "h2"), ErrNameTaken)
	assert.ErrorIs(t, reg.Claim(ctx, "misc1", "h2"), ErrNameTaken)
	assert.NoError(t, reg.Admit(ctx, "mIsC1", "h1", hour()), "the holder, whatever case its token carries")
	h, _, err := reg.Holder(ctx, "MISC1")
	require.NoError(t, err)
	assert.Equal(t, "h1", h)
	n, err := r.Client.Exists(ctx, claimKey(keyspace.New(r.Prefix), "misc1")).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the key is the canonical name's")
}

// TestAdmitCache: the cache answers only while the node hears the others.
func TestAdmitCache(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const ttl = time.Hour
	clk := newTestClock()

	t.Run("a registry that is not started asks Redis every time", func(t *testing.T) {
		reg := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(ttl), Now: clk.Now, Registerer: prometheus.NewRegistry()})
		require.NoError(t, reg.Claim(ctx, "cold", "h"))
		for range 5 {
			require.NoError(t, reg.Admit(ctx, "cold", "h", hour()))
		}
		assert.Equal(t, 5.0, count(t, reg, "admit", "renewed"))
		assert.Zero(t, count(t, reg, "admit", "cached"))
	})

	n := startNode(t, r, ttl, clk.Now)
	require.NoError(t, n.Claim(ctx, "alice", "s1"))
	n.heard(t, EventClaimed, 1) // its own claim's event: it may have come during the claim
	require.NoError(t, n.Admit(ctx, "alice", "s1", hour()))
	cached, renewed := count(t, n.Registry, "admit", "cached"), count(t, n.Registry, "admit", "renewed")
	t.Run("admits within TTL/4 of the last renewal ask nobody", func(t *testing.T) {
		for range 100 {
			require.NoError(t, n.Admit(ctx, "alice", "s1", hour()))
		}
		clk.Add(ttl/4 - time.Millisecond)
		require.NoError(t, n.Admit(ctx, "alice", "s1", hour()))
		assert.Equal(t, cached+101, count(t, n.Registry, "admit", "cached"))
		assert.Equal(t, renewed, count(t, n.Registry, "admit", "renewed"))
	})
	t.Run("at TTL/4 one admit goes to Redis and renews the claim", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, claimKey(keyspace.New(r.Prefix), "alice"), time.Minute).Err())
		clk.Add(time.Millisecond)
		require.NoError(t, n.Admit(ctx, "alice", "s1", hour()))
		require.NoError(t, n.Admit(ctx, "alice", "s1", hour()))
		assert.Equal(t, renewed+1, count(t, n.Registry, "admit", "renewed"))
		assert.Equal(t, cached+102, count(t, n.Registry, "admit", "cached"))
		assert.Greater(t, pttl(t, r, "alice"), 59*time.Minute, "renewed to the full TTL")
	})
	t.Run("other holders are cached apart", func(t *testing.T) {
		assert.ErrorIs(t, n.Admit(ctx, "alice", "s2", hour()), ErrNotHolder)
		assert.Equal(t, 1.0, count(t, n.Registry, "admit", "not_holder"))
	})
	t.Run("nothing is cached past the token's expiry", func(t *testing.T) {
		exp := clk.Now().Add(time.Second)
		require.NoError(t, n.Admit(ctx, "alice", "s1", exp)) // cached
		clk.Add(time.Second)
		before := count(t, n.Registry, "admit", "renewed")
		require.NoError(t, n.Admit(ctx, "alice", "s1", exp))
		assert.Equal(t, before+1, count(t, n.Registry, "admit", "renewed"))
	})
	t.Run("while the bus is not Ready the cache is not used", func(t *testing.T) {
		before := count(t, n.Registry, "admit", "renewed")
		n.bus.down.Store(true)
		for range 3 {
			require.NoError(t, n.Admit(ctx, "alice", "s1", hour()))
		}
		n.bus.down.Store(false)
		assert.Equal(t, before+3, count(t, n.Registry, "admit", "renewed"))
	})
	t.Run("a claim lost behind the cache is taken back at the next renewal", func(t *testing.T) {
		require.NoError(t, r.Client.Del(ctx, claimKey(keyspace.New(r.Prefix), "alice")).Err())
		require.NoError(t, n.Admit(ctx, "alice", "s1", hour()), "cached: not asked yet")
		clk.Add(ttl / 4)
		require.NoError(t, n.Admit(ctx, "alice", "s1", hour()))
		assert.Equal(t, 1.0, count(t, n.Registry, "admit", "taken_back"))
		h, _, err := n.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s1", h)
	})
	t.Run("the memory forgets idle holders", func(t *testing.T) {
		for i := range 50 {
			require.NoError(t, n.Claim(ctx, fmt.Sprintf("user%d", i), "s"))
		}
		n.mu.Lock()
		got := n.mem.lru.Len()
		n.mu.Unlock()
		assert.GreaterOrEqual(t, got, 50)
		clk.Add(ttl)
		require.NoError(t, n.Claim(ctx, "dave", "s"))
		n.mu.Lock()
		got = n.mem.lru.Len()
		n.mu.Unlock()
		assert.Equal(t, 1, got, "only dave's recent claim is kept")
	})
	t.Run("after Close nothing is cached", func(t *testing.T) {
		reg := startNode(t, r, ttl, clk.Now)
		require.NoError(t, reg.Claim(ctx, "erin", "s"))
		require.NoError(t, reg.Close(ctx))
		require.NoError(t, reg.Admit(ctx, "erin", "s", hour()))
		assert.Zero(t, count(t, reg.Registry, "admit", "cached"))
	})
}

func TestMemoryIsBounded(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	reg := New(r.Client, Config{Prefix: r.Prefix, MaxAdmits: 10, MaxRevocations: 5, Registerer: prometheus.NewRegistry()})
	evictions := func(m string) float64 {
		var d dto.Metric
		require.NoError(t, reg.m.evictions.WithLabelValues(m).Write(&d))
		return d.GetCounter().GetValue()
	}
	for i := range 20 {
		require.NoError(t, reg.Claim(ctx, fmt.Sprintf("u%d", i), "h"))
	}
	assert.Equal(t, 10, reg.mem.lru.Len())
	assert.Equal(t, 10.0, evictions("admits"))
	for i := range 8 {
		require.NoError(t, reg.Release(ctx, fmt.Sprintf("u%d", i), "h", hour()))
	}
	assert.Len(t, reg.mem.revoked, 5)
	assert.Equal(t, 3.0, evictions("revocations"))
	// The oldest revocation is forgotten here, not in Redis.
	assert.ErrorIs(t, reg.Admit(ctx, "u0", "h", hour()), ErrSignedOut)
	assert.Equal(t, 1.0, count(t, reg, "admit", "signed_out"), "asked Redis")
	assert.ErrorIs(t, reg.Admit(ctx, "u7", "h", hour()), ErrSignedOut)
	assert.Equal(t, 1.0, count(t, reg, "admit", "signed_out_local"), "remembered")
}

// TestRestoreFindsTheNameTaken: a node that gives a claim back after a
// resubscription and finds another holder there (a takeover whose event
// it missed) ends the old holder's session.
func TestRestoreFindsTheNameTaken(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n := startNode(t, r, time.Hour, nil)
	require.NoError(t, n.Claim(ctx, "alice", "h1"))
	require.NoError(t, n.Claim(ctx, "bob", "h2"))
	ks := keyspace.New(r.Prefix)
	// Behind the node's back, as if their events were lost: alice was
	// taken over, bob's claim vanished.
	require.NoError(t, r.Client.Set(ctx, claimKey(ks, "alice"), "h-new", time.Hour).Err())
	require.NoError(t, r.Client.Del(ctx, claimKey(ks, "bob")).Err())
	require.NoError(t, n.restore(ctx))
	n.callEnded()
	n.endedWithin(t, time.Second, claimant{"alice", "h1"})
	h, _, err := n.Holder(ctx, "bob")
	require.NoError(t, err)
	assert.Equal(t, "h2", h, "bob's claim given back")
	assert.ErrorIs(t, n.Admit(ctx, "alice", "h1", hour()), ErrNotHolder)
	left, err := r.Client.PTTL(ctx, claimKey(ks, "bob")).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, left, time.Hour, "for what it had left, not more")
}

func TestDecodeEvent(t *testing.T) {
	until := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, e := range []Event{
		{Type: EventSignedOut, User: "misc1", Holder: "h1", Until: until},
		{Type: EventClaimed, User: "misc1", Holder: "h2"},
	} {
		got, err := DecodeEvent([]byte(encodeEvent(e)))
		require.NoError(t, err)
		assert.Equal(t, e, got)
	}
	assert.JSONEq(t, `{"type":"claimed","user":"misc1","holder":"h2"}`, encodeEvent(Event{Type: EventClaimed, User: "misc1", Holder: "h2"}))
	for _, bad := range []string{`nope`, `{"type":"hug","user":"bob","holder":"h"}`, `{"type":"claimed","user":"Bob","holder":"h"}`,
		`{"type":"claimed","user":"b b","holder":"h"}`, `{"type":"claimed","user":"bob","holder":""}`, `{"type":"claimed","user":"bob","holder":"a:b"}`} {
		_, err := DecodeEvent([]byte(bad))
		assert.ErrorIs(t, err, ErrBadEvent, bad)
	}
}

// FuzzDecodeEvent: any bytes decode to a valid Event or ErrBadEvent, never
// a panic, and a valid Event survives a round trip.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"type":"signed_out","user":"misc1","holder":"h1","until":"2026-12-01T12:00:00Z"}`))
	f.Add([]byte(`{"type":"claimed","user":"misc1","holder":"h2"}`))
	f.Add([]byte(`{"type":"claimed","user":"a}{b","holder":"h2"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEvent(b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadEvent)
			return
		}
		again, err := DecodeEvent([]byte(encodeEvent(e)))
		require.NoError(t, err)
		require.True(t, e.Until.Equal(again.Until))
		e.Until, again.Until = time.Time{}, time.Time{}
		require.Equal(t, e, again)
	})
}
