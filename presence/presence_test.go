package presence

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/names"
)

// beat is Heartbeat for the tests that only need its error.
func beat(p *Presence, ctx context.Context, n Node) error {
	_, err := p.Heartbeat(ctx, n)
	return err
}

func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
}

// cluster3 is three nodes: three Presences, each on its own client, sharing
// one clock.
func cluster3(t *testing.T, r *redistest.Redis, cfg Config) [3]*Presence {
	t.Helper()
	cfg.Prefix = r.Prefix
	var ps [3]*Presence
	for i := range ps {
		ps[i] = New(r.NewClient(t), cfg)
	}
	return ps
}

// serverAndCluster are the Redis backends most tests here hold on.
var serverAndCluster = []redistest.Backend{{Name: "single server", Start: redistest.New}, {Name: "cluster", Start: redistest.Cluster}}

func TestPresenceAcrossNodes(t *testing.T) {
	t.Parallel()
	redistest.Each(t, serverAndCluster, testPresenceFlows)
}

func testPresenceFlows(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	clk := newClock()
	reg := prometheus.NewRegistry()
	cfg := Config{TTL: 30 * time.Second, Now: clk.Now}
	n := cluster3(t, r, cfg)
	n[0] = New(r.NewClient(t), Config{Prefix: r.Prefix, TTL: 30 * time.Second, Now: clk.Now, Registerer: reg})

	t.Run("a user touched on one node is online, with its node and rooms, on every node", func(t *testing.T) {
		require.NoError(t, n[0].Touch(ctx, "node-a", []UserState{
			{User: "alice", Rooms: []string{"general-2", "general-1"}},
			{User: "bob"},
		}))
		for _, p := range n {
			st, err := p.Get(ctx, "alice")
			require.NoError(t, err)
			assert.Equal(t, Status{User: "alice", Online: true, Node: "node-a", Rooms: []string{"general-1", "general-2"}, LastSeen: clk.Now()}, st)
		}
		st, err := n[2].Get(ctx, "bob")
		require.NoError(t, err)
		assert.True(t, st.Online)
		assert.Equal(t, []string{}, st.Rooms)
		count, err := n[1].Online(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(2), count)
		assert.Equal(t, 2.0, gathered(t, reg, "chatd_presence_touched_users_total"))
	})

	t.Run("a user on two nodes stays online when one of them disconnects it", func(t *testing.T) {
		clk.Add(time.Second)
		require.NoError(t, n[1].Touch(ctx, "node-b", []UserState{{User: "alice", Rooms: []string{"arena-1"}}}))
		st, err := n[2].Get(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "node-b", st.Node, "the node that renewed last")
		assert.Equal(t, []string{"arena-1", "general-1", "general-2"}, st.Rooms, "rooms of both nodes")

		require.NoError(t, n[0].Offline(ctx, "alice", "node-a"))
		st, err = n[2].Get(ctx, "alice")
		require.NoError(t, err)
		assert.True(t, st.Online)
		assert.Equal(t, "node-b", st.Node)
		assert.Equal(t, []string{"arena-1"}, st.Rooms)
		count, err := n[2].Online(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(2), count)
	})

	t.Run("an offline from a node that does not hold the user changes nothing", func(t *testing.T) {
		before, err := n[0].Get(ctx, "alice")
		require.NoError(t, err)
		clk.Add(time.Second)
		require.NoError(t, n[2].Offline(ctx, "alice", "node-c"))
		after, err := n[0].Get(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, before, after)
	})

	t.Run("a clean disconnect from the last node is offline at once and keeps last seen", func(t *testing.T) {
		clk.Add(time.Second)
		require.NoError(t, n[1].Offline(ctx, "alice", "node-b"))
		st, err := n[0].Get(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, Status{User: "alice", Rooms: []string{}, LastSeen: clk.Now()}, st)
		count, err := n[0].Online(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), count, "bob only")
	})

	t.Run("a dead node's users go offline after the TTL, last seen kept", func(t *testing.T) {
		seen := clk.Now()
		require.NoError(t, n[2].Touch(ctx, "node-c", []UserState{{User: "carol", Rooms: []string{"general-1"}}}))
		clk.Add(29 * time.Second)
		st, err := n[0].Get(ctx, "carol")
		require.NoError(t, err)
		assert.True(t, st.Online, "within the TTL")
		clk.Add(2 * time.Second)
		st, err = n[0].Get(ctx, "carol")
		require.NoError(t, err)
		assert.Equal(t, Status{User: "carol", Rooms: []string{}, LastSeen: seen}, st)
		count, err := n[1].Online(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(0), count, "bob's node died too")
	})

	t.Run("a read drops the rooms a dead node left", func(t *testing.T) {
		require.NoError(t, n[0].Touch(ctx, "node-a", []UserState{{User: "carol", Rooms: []string{"x-1"}}}))
		st, err := n[1].Get(ctx, "carol")
		require.NoError(t, err)
		assert.Equal(t, []string{"x-1"}, st.Rooms)
		fields, err := r.Client.HKeys(ctx, n[0].k.user("carol")).Result()
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"last_seen", "node:node-a", "rooms:node-a", "conns:node-a"}, fields, "node-c's claim is gone")
	})

	t.Run("an unknown user is offline with no last seen", func(t *testing.T) {
		st, err := n[1].Get(ctx, "nobody")
		require.NoError(t, err)
		assert.Equal(t, Status{User: "nobody", Rooms: []string{}}, st)
	})

	t.Run("nodes register, drop out after the TTL, and leave", func(t *testing.T) {
		for i, id := range []string{"node-c", "node-a", "node-b"} {
			require.NoError(t, beat(n[i], ctx, Node{ID: id, Addr: "10.0.0.1:808" + id[5:], Connections: i}))
		}
		nodes, err := n[0].Nodes(ctx)
		require.NoError(t, err)
		require.Len(t, nodes, 3)
		assert.Equal(t, []string{"node-a", "node-b", "node-c"}, []string{nodes[0].ID, nodes[1].ID, nodes[2].ID})
		assert.Equal(t, Node{ID: "node-a", Addr: "10.0.0.1:808a", Connections: 1, LastHeartbeat: clk.Now()}, nodes[0])

		clk.Add(20 * time.Second)
		require.NoError(t, beat(n[1], ctx, Node{ID: "node-a", Connections: 5}))
		require.NoError(t, beat(n[2], ctx, Node{ID: "node-b"}))
		clk.Add(11 * time.Second) // node-c last beat 31s ago
		nodes, err = n[2].Nodes(ctx)
		require.NoError(t, err)
		require.Len(t, nodes, 2)
		assert.Equal(t, "node-a", nodes[0].ID)
		assert.Equal(t, 5, nodes[0].Connections)
		assert.Equal(t, "node-b", nodes[1].ID)

		started := clk.Now().Add(-time.Hour).UTC()
		full := Node{ID: "node-b", Addr: "10.0.0.1:8081", Connections: 7, Version: "v1.2.3", StartedAt: started,
			CPU: 0.25, MemoryBytes: 64 << 20, HeapBytes: 12 << 20, Goroutines: 42}
		require.NoError(t, beat(n[2], ctx, full))
		nodes, err = n[0].Nodes(ctx)
		require.NoError(t, err)
		require.Len(t, nodes, 2)
		full.LastHeartbeat = clk.Now().UTC()
		assert.Equal(t, full, nodes[1], "a node's own figures are read back whole")

		require.NoError(t, n[2].Leave(ctx, "node-b"))
		nodes, err = n[0].Nodes(ctx)
		require.NoError(t, err)
		require.Len(t, nodes, 1)
		assert.Equal(t, "node-a", nodes[0].ID)
	})
}

func TestRealTTLs(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	// Real TTLs on a loaded 2-core CI machine: long enough that the first
	// Get lands well inside the TTL, short enough to keep the test quick.
	n := cluster3(t, r, Config{TTL: 2 * time.Second, Retention: 4 * time.Second})

	require.NoError(t, n[0].Touch(ctx, "node-a", []UserState{{User: "dave", Rooms: []string{"general-1"}}}))
	require.NoError(t, beat(n[1], ctx, Node{ID: "node-b"}))
	st, err := n[2].Get(ctx, "dave")
	require.NoError(t, err)
	require.True(t, st.Online)
	seen := st.LastSeen

	t.Run("a user nobody renews is offline by itself, with last seen kept", func(t *testing.T) {
		require.Eventually(t, func() bool {
			st, err := n[2].Get(ctx, "dave")
			return err == nil && !st.Online
		}, 10*time.Second, 20*time.Millisecond)
		st, err := n[1].Get(ctx, "dave")
		require.NoError(t, err)
		assert.Equal(t, Status{User: "dave", Rooms: []string{}, LastSeen: seen}, st)
		count, err := n[0].Online(ctx)
		require.NoError(t, err)
		assert.Zero(t, count)
	})

	t.Run("last seen is forgotten after the retention", func(t *testing.T) {
		require.Eventually(t, func() bool {
			return r.Client.Exists(ctx, n[0].k.user("dave")).Val() == 0
		}, 10*time.Second, 20*time.Millisecond)
		st, err := n[1].Get(ctx, "dave")
		require.NoError(t, err)
		assert.Equal(t, Status{User: "dave", Rooms: []string{}}, st)
	})

	t.Run("a node that stops beating drops out and its keys expire", func(t *testing.T) {
		require.Eventually(t, func() bool {
			nodes, err := n[0].Nodes(ctx)
			return err == nil && len(nodes) == 0
		}, 10*time.Second, 20*time.Millisecond)
		require.Eventually(t, func() bool {
			return r.Client.Exists(ctx, n[0].k.nodeBeats(), n[0].k.nodeInfo()).Val() == 0
		}, 10*time.Second, 20*time.Millisecond)
	})
}

func TestScriptsReloadAfterFlush(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	p := New(r.Client, Config{Prefix: r.Prefix})
	require.NoError(t, p.Touch(ctx, "node-a", []UserState{{User: "erin"}}))
	require.NoError(t, beat(p, ctx, Node{ID: "node-a"}))
	require.NoError(t, r.Client.ScriptFlush(ctx).Err())
	require.NoError(t, p.Offline(ctx, "erin", "node-a"))
	nodes, err := p.Nodes(ctx)
	require.NoError(t, err)
	assert.Len(t, nodes, 1)
	st, err := p.Get(ctx, "erin")
	require.NoError(t, err)
	assert.False(t, st.Online)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	p := New(r.Client, Config{Prefix: r.Prefix})
	t.Run("bad user names are refused before any write", func(t *testing.T) {
		err := p.Touch(ctx, "node-a", []UserState{{User: "ok"}, {User: "a}{b"}})
		assert.ErrorIs(t, err, names.ErrBadName)
		st, err := p.Get(ctx, "ok")
		require.NoError(t, err)
		assert.False(t, st.Online)
		_, err = p.Get(ctx, "")
		assert.ErrorIs(t, err, names.ErrBadName)
		assert.ErrorIs(t, p.Offline(ctx, "*", "node-a"), names.ErrBadName)
	})
	t.Run("bad node ids are refused", func(t *testing.T) {
		assert.ErrorIs(t, p.Touch(ctx, "", []UserState{{User: "ok"}}), ErrBadNode)
		assert.ErrorIs(t, p.Offline(ctx, "ok", ""), ErrBadNode)
		assert.ErrorIs(t, beat(p, ctx, Node{ID: "{x}"}), ErrBadNode)
		assert.ErrorIs(t, p.Leave(ctx, ""), ErrBadNode)
	})
}

func TestJSONShapes(t *testing.T) {
	st := Status{User: "a", Online: true, Node: "n", Rooms: []string{"r-1"}, LastSeen: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	b, err := json.Marshal(st)
	require.NoError(t, err)
	assert.JSONEq(t, `{"user":"a","online":true,"node":"n","rooms":["r-1"],"last_seen":"2026-01-02T03:04:05Z"}`, string(b))
	b, err = json.Marshal(Node{ID: "n", Addr: "h:1", Connections: 3, LastHeartbeat: st.LastSeen})
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"n","addr":"h:1","connections":3,"last_heartbeat":"2026-01-02T03:04:05Z"}`, string(b))
}

// gathered returns the value of the counter name in reg.
func gathered(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

func TestSearchAndConns(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clk := newClock()
	n := cluster3(t, r, Config{Now: clk.Now})

	require.NoError(t, n[0].Touch(ctx, "node-a", []UserState{
		{User: "Alice", Rooms: []string{"general-1"}, Conns: []Conn{{ID: "c2", Session: "s1"}, {ID: "c1", Session: "s2"}}},
		{User: "alfred"}, {User: "bob"}, {User: "al_x"},
	}))
	require.NoError(t, n[1].Touch(ctx, "node-b", []UserState{{User: "Alice", Rooms: []string{"lounge-2"}, Conns: []Conn{{ID: "c1", Session: "s3"}}}}))

	t.Run("a prefix finds the online users whose names start with it, in either case", func(t *testing.T) {
		for _, prefix := range []string{"al", "AL", "aL"} {
			got, err := n[2].Search(ctx, prefix, 10)
			require.NoError(t, err)
			assert.Equal(t, []string{"Alice", "al_x", "alfred"}, got, prefix)
		}
		got, err := n[2].Search(ctx, "al", 2)
		require.NoError(t, err)
		assert.Len(t, got, 2, "limit is honoured")
		got, err = n[2].Search(ctx, "zz", 10)
		require.NoError(t, err)
		assert.Empty(t, got)
	})

	t.Run("a prefix with a glob character is refused", func(t *testing.T) {
		for _, prefix := range []string{"*", "a?", "[a]", ""} {
			_, err := n[2].Search(ctx, prefix, 10)
			assert.ErrorIs(t, err, names.ErrBadName, prefix)
		}
	})

	t.Run("Get lists the connections of every live node", func(t *testing.T) {
		st, err := n[2].Get(ctx, "Alice")
		require.NoError(t, err)
		assert.Equal(t, []Conn{{ID: "c1", Session: "s2", Node: "node-a"}, {ID: "c2", Session: "s1", Node: "node-a"}, {ID: "c1", Session: "s3", Node: "node-b"}}, st.Conns)
		assert.Equal(t, []string{"general-1", "lounge-2"}, st.Rooms)
	})

	t.Run("an offline node's connections go with it, and a user past its TTL is not found", func(t *testing.T) {
		require.NoError(t, n[0].Offline(ctx, "Alice", "node-b"))
		st, err := n[2].Get(ctx, "Alice")
		require.NoError(t, err)
		assert.Equal(t, []Conn{{ID: "c1", Session: "s2", Node: "node-a"}, {ID: "c2", Session: "s1", Node: "node-a"}}, st.Conns)
		clk.Add(time.Minute)
		got, err := n[2].Search(ctx, "al", 10)
		require.NoError(t, err)
		assert.Empty(t, got)
	})
}

// TestClaimsLiveWithTheirRun: a node with a run writes each user once and
// keeps it online by beating, not by touching it again; the claim goes
// with the run (beats stop, or another run of the same node id beats).
func TestClaimsLiveWithTheirRun(t *testing.T) {
	t.Parallel()
	redistest.Each(t, serverAndCluster, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		clk := newClock()
		cfg := Config{Prefix: r.Prefix, TTL: 30 * time.Second, Now: clk.Now}
		a1 := New(r.NewClient(t), Config{Prefix: r.Prefix, TTL: 30 * time.Second, Now: clk.Now, Run: "run-1"})
		reader := New(r.NewClient(t), cfg)

		b, err := a1.Heartbeat(ctx, Node{ID: "node-a", Run: "run-1"})
		require.NoError(t, err)
		assert.True(t, b.Fresh, "a first beat is fresh")
		assert.Equal(t, []string{"run-1"}, b.Runs)
		b, err = a1.Heartbeat(ctx, Node{ID: "node-a", Run: "run-1"})
		require.NoError(t, err)
		assert.False(t, b.Fresh, "the next beat is not")

		require.NoError(t, a1.Touch(ctx, "node-a", []UserState{{User: "erin", Rooms: []string{"general-1"}}}))
		exp, err := r.Client.HGet(ctx, reader.k.user("erin"), "node:node-a").Int64()
		require.NoError(t, err)
		assert.Equal(t, clk.Now().Add(ClaimHorizon).UnixMilli(), exp, "a node of an older chatd judges the claim by this expiry during a rolling upgrade")
		for range 5 { // 100 s: three TTLs, beating and keeping online, no Touch
			clk.Add(20 * time.Second)
			_, err := a1.Heartbeat(ctx, Node{ID: "node-a", Run: "run-1"})
			require.NoError(t, err)
			require.NoError(t, a1.KeepOnline(ctx, []string{"erin"}))
		}
		st, err := reader.Get(ctx, "erin")
		require.NoError(t, err)
		assert.True(t, st.Online, "the claim lives with its run's beats")
		assert.Equal(t, "node-a", st.Node)
		assert.Equal(t, []string{"general-1"}, st.Rooms)
		n, err := reader.Online(ctx)
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)

		t.Run("another run of the same node id does not keep the old run's claims", func(t *testing.T) {
			a2 := New(r.NewClient(t), Config{Prefix: r.Prefix, TTL: 30 * time.Second, Now: clk.Now, Run: "run-2"})
			b, err := a2.Heartbeat(ctx, Node{ID: "node-a", Run: "run-2"})
			require.NoError(t, err)
			assert.True(t, b.Fresh, "a new run is fresh")
			st, err := reader.Get(ctx, "erin")
			require.NoError(t, err)
			assert.False(t, st.Online, "run-1's claim is dead")
			fields, err := r.Client.HKeys(ctx, reader.k.user("erin")).Result()
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"last_seen"}, fields, "the dead claim is dropped by the read")

			require.NoError(t, a2.Touch(ctx, "node-a", []UserState{{User: "erin"}}))
			clk.Add(40 * time.Second)
			_, err = a2.Heartbeat(ctx, Node{ID: "node-a", Run: "run-2"})
			require.NoError(t, err)
			st, err = reader.Get(ctx, "erin")
			require.NoError(t, err)
			assert.True(t, st.Online)
		})

		t.Run("a claim goes offline when its node stops beating", func(t *testing.T) {
			clk.Add(31 * time.Second)
			st, err := reader.Get(ctx, "erin")
			require.NoError(t, err)
			assert.False(t, st.Online)
			b, err := a1.Heartbeat(ctx, Node{ID: "node-a", Run: "run-2"})
			require.NoError(t, err)
			assert.True(t, b.Fresh, "a beat after a lapse is fresh: touch everyone again")
		})

		t.Run("Offline by the run drops its claim, past the claim's expiry", func(t *testing.T) {
			a3 := New(r.NewClient(t), Config{Prefix: r.Prefix, TTL: 30 * time.Second, Now: clk.Now, Run: "run-3"})
			_, err := a3.Heartbeat(ctx, Node{ID: "node-c", Run: "run-3"})
			require.NoError(t, err)
			require.NoError(t, a3.Touch(ctx, "node-c", []UserState{{User: "fay"}}))
			clk.Add(time.Minute)
			_, err = a3.Heartbeat(ctx, Node{ID: "node-c", Run: "run-3"})
			require.NoError(t, err)
			st, err := reader.Get(ctx, "fay")
			require.NoError(t, err)
			require.True(t, st.Online)
			require.NoError(t, a3.Offline(ctx, "fay", "node-c"))
			st, err = reader.Get(ctx, "fay")
			require.NoError(t, err)
			assert.Equal(t, Status{User: "fay", Rooms: []string{}, LastSeen: clk.Now()}, st)
		})

		t.Run("KeepOnline refuses a bad name before writing", func(t *testing.T) {
			assert.ErrorIs(t, a1.KeepOnline(ctx, []string{"ok", "bad name"}), names.ErrBadName)
		})
	})
}
