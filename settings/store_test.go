package settings

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

const wait = 10 * time.Second

// node is one simulated chatd node: its own client, bus and Store, with a
// watcher on every key.
type node struct {
	*Store
	changes chan Change
}

func startNode(t testing.TB, r *redistest.Redis) *node {
	t.Helper()
	c := r.NewClient(t)
	b := bus.New(c, bus.Config{Prefix: r.Prefix, Logger: quiet})
	t.Cleanup(b.Start(context.Background()))
	s := New(c, Config{Prefix: r.Prefix, Logger: quiet, Registerer: prometheus.NewRegistry()})
	n := &node{Store: s, changes: make(chan Change, 4096)}
	s.Watch("", func(c Change) { n.changes <- c })
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	require.NoError(t, s.Start(ctx, b))
	t.Cleanup(func() { assert.NoError(t, s.Close(context.Background())) })
	return n
}

func startNodes(t testing.TB, r *redistest.Redis, n int) []*node {
	var nodes []*node
	for i := 0; i < n; i++ {
		nodes = append(nodes, startNode(t, r))
	}
	return nodes
}

// next returns the next change a node's watcher saw.
func (n *node) next(t *testing.T) Change {
	t.Helper()
	return recv(t, n.changes)
}

// recv receives from a watcher's channel, failing after a while.
func recv(t *testing.T, ch <-chan Change) Change {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(wait):
		t.Fatal("no change reached the watcher")
		return Change{}
	}
}

// until waits for a change the watcher saw that satisfies ok.
func (n *node) until(t *testing.T, ok func(Change) bool) Change {
	t.Helper()
	for {
		if c := n.next(t); ok(c) {
			return c
		}
	}
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestPropagation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		get  func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.New},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := tc.get(t)
			nodes := startNodes(t, r, 3)
			a, b, c := nodes[0], nodes[1], nodes[2]

			t.Run("a set on one node reaches the others and their watchers", func(t *testing.T) {
				v, err := a.Set(ctx, RoomCapacity, raw(`75`))
				require.NoError(t, err)
				assert.Equal(t, 75, a.Int(RoomCapacity), "the writer reads its own write at once")
				want := Change{Key: RoomCapacity, Value: 75, Version: v, Op: "set"}
				for _, n := range []*node{a, b, c} {
					assert.Equal(t, want, n.next(t))
					assert.Equal(t, 75, n.Int(RoomCapacity))
					ver, values := n.Values()
					assert.Equal(t, v, ver)
					assert.Equal(t, 75, values[RoomCapacity])
					assert.Equal(t, 10.0, values[RateMessagesPerSecond], "defaults filled in")
				}
			})

			t.Run("a reset brings every node back to the default", func(t *testing.T) {
				v, err := b.Reset(ctx, RoomCapacity)
				require.NoError(t, err)
				want := Change{Key: RoomCapacity, Value: 50, Version: v, Op: "delete"}
				for _, n := range []*node{a, b, c} {
					assert.Equal(t, want, n.next(t))
					assert.Equal(t, 50, n.Int(RoomCapacity))
					assert.Equal(t, v, n.Version())
				}
			})

			t.Run("every type travels", func(t *testing.T) {
				_, err := c.Set(ctx, MOTD, raw(`"welcome: {all} \"friends\" ✓"`))
				require.NoError(t, err)
				_, err = c.Set(ctx, SeenFPRate, raw(`0.005`))
				require.NoError(t, err)
				for _, n := range []*node{a, b} {
					n.until(t, func(c Change) bool { return c.Key == SeenFPRate })
					assert.Equal(t, `welcome: {all} "friends" ✓`, n.String(MOTD))
					assert.Equal(t, 0.005, n.Float(SeenFPRate))
				}
			})

			t.Run("a node started after the changes loads them", func(t *testing.T) {
				d := startNode(t, r)
				assert.Equal(t, c.Version(), d.Version())
				_, want := c.Values()
				_, got := d.Values()
				assert.Equal(t, want, got)
				seen := map[string]bool{}
				for len(seen) < 2 {
					seen[d.next(t).Key] = true
				}
				assert.Equal(t, map[string]bool{MOTD: true, SeenFPRate: true}, seen,
					"watchers registered before Start hear the values found")
			})
		})
	}
}

func TestConcurrentSetsConverge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		get  func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.New},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			r := tc.get(t)
			nodes := startNodes(t, r, 3)
			const perNode = 50
			var mu sync.Mutex
			var versions []int64
			var wg sync.WaitGroup
			for i, n := range nodes {
				for j := 0; j < perNode; j++ {
					wg.Add(1)
					go func(value int) {
						defer wg.Done()
						v, err := n.Set(ctx, RoomCapacity, encode(value))
						if assert.NoError(t, err) {
							mu.Lock()
							versions = append(versions, v)
							mu.Unlock()
						}
					}(1 + i*perNode + j)
				}
			}
			wg.Wait()
			slices.Sort(versions)
			want := make([]int64, 3*perNode)
			for i := range want {
				want[i] = int64(i + 1)
			}
			require.Equal(t, want, versions, "every write got its own version")

			last := versions[len(versions)-1]
			stored, err := r.Client.HGet(ctx, keysFor(r).values(), RoomCapacity).Int()
			require.NoError(t, err)
			for i, n := range nodes {
				require.Eventually(t, func() bool { return n.Version() == last }, wait, 5*time.Millisecond, "node %d", i)
				assert.Equal(t, stored, n.Int(RoomCapacity), "node %d holds the last write", i)
			}
		})
	}
}

func keysFor(r *redistest.Redis) keys { return New(nil, Config{Prefix: r.Prefix}).keys }

func TestPubsubKilledConverges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.Own(t, redistest.Options{}) // CLIENT KILL TYPE pubsub hits every test on a server
	nodes := startNodes(t, r, 3)
	a, b := nodes[0], nodes[1]
	before := testkit.Value(t, b.metrics.reloads.WithLabelValues("ok"))

	require.NoError(t, r.NewClient(t).Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
	// Published while no node is subscribed: lost on the channel.
	_, err := a.Set(ctx, MOTD, raw(`"said while you were away"`))
	require.NoError(t, err)
	v, err := a.Set(ctx, MessageMaxLength, raw(`123`))
	require.NoError(t, err)

	for i, n := range nodes[1:] {
		c := n.until(t, func(c Change) bool { return c.Key == MessageMaxLength })
		assert.Equal(t, 123, c.Value, "node %d", i+1)
		assert.Equal(t, v, n.Version(), "node %d", i+1)
		assert.Equal(t, "said while you were away", n.String(MOTD), "node %d: no version without its changes", i+1)
	}
	require.Eventually(t, func() bool { return testkit.Value(t, b.metrics.reloads.WithLabelValues("ok")) > before },
		wait, 5*time.Millisecond, "the resubscription re-reads the snapshot")

	t.Run("and follows changes after the reconnect", func(t *testing.T) {
		v, err := a.Set(ctx, MessageMaxLength, raw(`456`))
		require.NoError(t, err)
		for _, n := range nodes {
			require.Eventually(t, func() bool { return n.Version() == v && n.Int(MessageMaxLength) == 456 }, wait, 5*time.Millisecond)
		}
	})
}

func TestRedisLostItsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.Own(t, redistest.Options{}) // no persistence: a restart empties it
	nodes := startNodes(t, r, 2)
	for i := 0; i < 3; i++ {
		_, err := nodes[0].Set(ctx, RoomCapacity, encode(10+i))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return nodes[1].Version() == 3 }, wait, 5*time.Millisecond)

	r.Server.Restart(t)
	for _, n := range nodes {
		require.Eventually(t, func() bool { return n.Version() == 0 && n.Int(RoomCapacity) == 50 }, wait, 5*time.Millisecond,
			"the node follows Redis back to the defaults")
	}
	v, err := nodes[1].Set(ctx, RoomCapacity, raw(`99`))
	require.NoError(t, err)
	assert.Equal(t, int64(1), v)
	require.Eventually(t, func() bool { return nodes[0].Int(RoomCapacity) == 99 }, wait, 5*time.Millisecond,
		"the new history applies although its versions are lower")
}

func TestRefusedWriteChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.New(t)
	reg := prometheus.NewRegistry()
	s := New(r.Client, Config{Prefix: r.Prefix, Logger: quiet, Registerer: reg})
	k := s.keys

	sub := r.NewClient(t).Subscribe(ctx, k.changes())
	defer sub.Close()
	_, err := sub.Receive(ctx) // the subscription is confirmed
	require.NoError(t, err)

	bad := map[string][]string{
		RoomCapacity:          {`0`, `2.5`, `"10"`, `null`, `[]`, `{}`, `true`, ``, `nope`},
		MessageMaxLength:      {`16385`, `-1`},
		SeatLeaseSeconds:      {`1`, `3601`},
		SeenCapacity:          {`99`, `1e8`},
		RateMessagesPerSecond: {`0`, `-0.5`, `10001`, `"10"`},
		SeenFPRate:            {`0`, `0.5`, `"0.01"`},
		MOTD:                  {`1`, `null`, `["x"]`, `"` + string(make([]byte, 1001)) + `"`},
	}
	refused := 0
	for key, values := range bad {
		for _, v := range values {
			refused++
			_, err := s.Set(ctx, key, raw(v))
			require.ErrorIs(t, err, ErrBadValue, "%s=%s", key, v)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Contains(t, e.Reason, key+" must be ")
		}
	}
	_, err = s.Set(ctx, "no.such", raw(`1`))
	assert.ErrorIs(t, err, ErrUnknownSetting)
	_, err = s.Reset(ctx, "no.such")
	assert.ErrorIs(t, err, ErrUnknownSetting)
	refused += 2

	n, err := r.Client.Exists(ctx, k.values(), k.version()).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing was written")
	assert.Equal(t, int64(0), s.Version())
	assert.Equal(t, 50, s.Int(RoomCapacity))

	// The first message on the channel is the first accepted write, and it
	// is JSON, whatever the value holds.
	v, err := s.Set(ctx, MOTD, raw(`"a:b:c"`))
	require.NoError(t, err)
	assert.Equal(t, int64(1), v)
	rctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	msg, err := sub.ReceiveMessage(rctx)
	require.NoError(t, err)
	assert.JSONEq(t, `{"key":"motd","value":"a:b:c","version":1,"op":"set"}`, msg.Payload)
	_, err = s.Reset(ctx, MOTD)
	require.NoError(t, err)
	msg, err = sub.ReceiveMessage(rctx)
	require.NoError(t, err)
	assert.Equal(t, `{"key":"motd","value":null,"version":2,"op":"delete"}`, msg.Payload)

	assert.Equal(t, float64(refused), testkit.Value(t, s.metrics.writes.WithLabelValues("refused")))
	assert.Equal(t, 2.0, testkit.Value(t, s.metrics.writes.WithLabelValues("ok")))
}

func TestStartAndClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.New(t)
	c := r.NewClient(t)
	b := bus.New(c, bus.Config{Prefix: r.Prefix, Logger: quiet})
	stopBus := b.Start(ctx)
	defer stopBus()
	s := New(c, Config{Prefix: r.Prefix, Logger: quiet})

	t.Run("Start twice is refused", func(t *testing.T) {
		require.NoError(t, s.Start(ctx, b))
		assert.ErrorIs(t, s.Start(ctx, b), ErrStarted)
	})

	t.Run("a cancelled watcher hears nothing more", func(t *testing.T) {
		got := make(chan Change, 10)
		cancel := s.Watch(MOTD, func(c Change) { got <- c })
		all := make(chan Change, 10)
		s.Watch("", func(c Change) { all <- c })
		_, err := s.Set(ctx, RoomCapacity, raw(`5`))
		require.NoError(t, err)
		_, err = s.Set(ctx, MOTD, raw(`"one"`))
		require.NoError(t, err)
		assert.Equal(t, RoomCapacity, recv(t, all).Key)
		assert.Equal(t, MOTD, recv(t, all).Key)
		assert.Equal(t, "one", recv(t, got).Value, "a key's watcher hears only its key")
		cancel()
		_, err = s.Set(ctx, MOTD, raw(`"two"`))
		require.NoError(t, err)
		assert.Equal(t, "two", recv(t, all).Value)
		assert.Empty(t, got)
	})

	t.Run("Close stops following, reads keep the last values", func(t *testing.T) {
		require.NoError(t, s.Close(ctx))
		require.NoError(t, s.Close(ctx), "a second Close does nothing")
		other := New(r.NewClient(t), Config{Prefix: r.Prefix, Logger: quiet})
		_, err := other.Set(ctx, MOTD, raw(`"after close"`))
		require.NoError(t, err)
		assert.Equal(t, "two", s.String(MOTD))
	})

	t.Run("Start fails when the subscription fails", func(t *testing.T) {
		s := New(c, Config{Prefix: r.Prefix, Logger: quiet})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		assert.ErrorIs(t, s.Start(cctx, b), context.Canceled)
	})
}
