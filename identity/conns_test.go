package identity

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/names"
)

func newTestClock() *testkit.Clock { return testkit.NewClock(time.Now()) }

// connsPTTL returns the remaining TTL of addr's lease key under prefix (-2:
// no key).
func connsPTTL(t *testing.T, r *redistest.Redis, prefix, addr string) time.Duration {
	t.Helper()
	k, err := RateKey(addr)
	require.NoError(t, err)
	d, err := r.Client.PTTL(context.Background(), connsKey(keyspace.New(prefix), k)).Result()
	require.NoError(t, err)
	return d
}

// admitted runs Admit and requires no error.
func admitted(t *testing.T, c *Conns, addr, id string, max int) bool {
	t.Helper()
	ok, err := c.Admit(context.Background(), addr, id, max)
	require.NoError(t, err)
	return ok
}

// TestConnsCapAcrossNodes: three nodes (three clients) race 300 upgrades
// from one address with a cap of 50: exactly 50 are admitted, on a single
// server and on a Cluster, for several addresses spread over the slots.
func TestConnsCapAcrossNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		get  func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.Real},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.get(t)
			ctx := context.Background()
			var nodes [3]*Conns
			for i := range nodes {
				nodes[i] = NewConns(r.NewClient(t), ConnsConfig{Prefix: r.Prefix})
			}
			const max, tries = 50, 300
			for _, addr := range []string{"203.0.113.7", "2001:db8::1", "198.51.100.20"} {
				var ok atomic.Int64
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range tries {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						got, err := nodes[i%3].Admit(ctx, addr, fmt.Sprintf("c%d", i), max)
						if assert.NoError(t, err) && got {
							ok.Add(1)
						}
					}()
				}
				close(start)
				wg.Wait()
				assert.Equal(t, int64(max), ok.Load(), addr)
				n, err := nodes[0].Count(ctx, addr)
				require.NoError(t, err)
				assert.Equal(t, max, n, addr)
				ttl := connsPTTL(t, r, r.Prefix, addr)
				assert.Greater(t, ttl, DefaultLease-20*time.Second, "the key carries the lease as its TTL")
				assert.LessOrEqual(t, ttl, DefaultLease)
			}
			// One Renew of every id tried, over three addresses (three slots):
			// the admitted keep their leases, the refused are not added.
			var all []Conn
			for _, addr := range []string{"203.0.113.7", "2001:db8::1", "198.51.100.20"} {
				for i := range tries {
					all = append(all, Conn{addr, fmt.Sprintf("c%d", i)})
				}
			}
			require.NoError(t, nodes[1].Renew(ctx, all))
			for _, addr := range []string{"203.0.113.7", "2001:db8::1", "198.51.100.20"} {
				n, err := nodes[2].Count(ctx, addr)
				require.NoError(t, err)
				assert.Equal(t, max, n, "after Renew: %s", addr)
			}
		})
	}
}

func TestConnsLeases(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const addr = "192.0.2.1"
	lease := fixed(time.Minute)

	t.Run("a dead node's leases end after one lease", func(t *testing.T) {
		clk := newTestClock()
		dead := NewConns(r.NewClient(t), ConnsConfig{Prefix: r.Prefix + ":dead", Lease: lease, Now: clk.Now})
		live := NewConns(r.NewClient(t), ConnsConfig{Prefix: r.Prefix + ":dead", Lease: lease, Now: clk.Now})
		for i := range 3 {
			require.True(t, admitted(t, dead, addr, fmt.Sprintf("d%d", i), 3))
		}
		assert.False(t, admitted(t, live, addr, "l0", 3), "the dead node's three hold the cap")
		clk.Add(time.Minute - time.Millisecond)
		assert.False(t, admitted(t, live, addr, "l0", 3), "still held just before the lease ends")
		clk.Add(time.Millisecond)
		for i := range 3 {
			assert.True(t, admitted(t, live, addr, fmt.Sprintf("l%d", i), 3), "ended leases are dropped by Admit")
		}
		n, err := live.Count(ctx, addr)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
	})

	t.Run("renewed leases keep their place", func(t *testing.T) {
		clk := newTestClock()
		a := NewConns(r.NewClient(t), ConnsConfig{Prefix: r.Prefix + ":renew", Lease: lease, Now: clk.Now})
		b := NewConns(r.NewClient(t), ConnsConfig{Prefix: r.Prefix + ":renew", Lease: lease, Now: clk.Now})
		require.True(t, admitted(t, a, addr, "a0", 2))
		require.True(t, admitted(t, a, "2001:db8::9", "a1", 2))
		require.True(t, admitted(t, a, addr, "a2", 2))
		for range 5 {
			clk.Add(40 * time.Second)
			require.NoError(t, a.Renew(ctx, []Conn{{addr, "a0"}, {"2001:db8::9", "a1"}, {addr, "a2"}}))
			assert.False(t, admitted(t, b, addr, "b0", 2), "renewed every 40 s of a 60 s lease: still full")
		}
		n, err := b.Count(ctx, "2001:db8::9")
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		clk.Add(61 * time.Second)
		assert.True(t, admitted(t, b, addr, "b0", 2), "unrenewed for a lease: gone")
		require.NoError(t, a.Renew(ctx, []Conn{{addr, "a0"}}))
		n, err = b.Count(ctx, addr)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "Renew does not bring back an ended lease (ZADD XX)")
	})

	t.Run("Release frees a place at once", func(t *testing.T) {
		c := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix + ":release"})
		require.True(t, admitted(t, c, addr, "x0", 2))
		require.True(t, admitted(t, c, addr, "x1", 2))
		require.False(t, admitted(t, c, addr, "x2", 2))
		require.NoError(t, c.Release(ctx, addr, "x0"))
		assert.True(t, admitted(t, c, addr, "x2", 2))
		require.NoError(t, c.Release(ctx, addr, "x0"), "releasing twice is not an error")
		require.NoError(t, c.Release(ctx, addr, "x1"))
		require.NoError(t, c.Release(ctx, addr, "x2"))
		k, err := RateKey(addr)
		require.NoError(t, err)
		n, err := r.Client.Exists(ctx, connsKey(keyspace.New(r.Prefix+":release"), k)).Result()
		require.NoError(t, err)
		assert.Zero(t, n, "the key goes with its last lease")
	})

	t.Run("Admit is idempotent even at the cap", func(t *testing.T) {
		c := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix + ":idem"})
		require.True(t, admitted(t, c, addr, "i0", 1))
		assert.True(t, admitted(t, c, addr, "i0", 1), "a retry of an admitted connection")
		assert.False(t, admitted(t, c, addr, "i1", 1))
	})

	t.Run("no cap still records", func(t *testing.T) {
		c := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix + ":nocap"})
		for i := range 20 {
			require.True(t, admitted(t, c, addr, fmt.Sprintf("n%d", i), 0))
		}
		assert.True(t, admitted(t, c, addr, "neg", -1))
		assert.False(t, admitted(t, c, addr, "late", 21), "a cap set later counts the open ones")
		assert.Greater(t, connsPTTL(t, r, r.Prefix+":nocap", addr), time.Duration(0))
	})

	t.Run("an IPv6 /64 is one address, a mapped IPv4 its IPv4", func(t *testing.T) {
		c := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix + ":v6"})
		require.True(t, admitted(t, c, "2001:db8:1:2::1", "v0", 2))
		require.True(t, admitted(t, c, "2001:db8:1:2:ffff::9", "v1", 2))
		assert.False(t, admitted(t, c, "2001:db8:1:2::3", "v2", 2), "same /64")
		assert.True(t, admitted(t, c, "2001:db8:1:3::1", "v2", 2), "next /64")
		require.True(t, admitted(t, c, "198.51.100.1", "m0", 1))
		assert.False(t, admitted(t, c, "::ffff:198.51.100.1", "m1", 1))
	})

	t.Run("bad input is refused before Redis", func(t *testing.T) {
		c := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix + ":bad", Registerer: prometheus.NewRegistry()})
		for _, tc := range []struct{ addr, id string }{
			{"not-an-ip", "c1"}, {"", "c1"}, {"10.0.0.1", ""}, {"10.0.0.1", "a}b"}, {"10.0.0.1", string(make([]byte, MaxConnIDLen+1))},
		} {
			_, err := c.Admit(ctx, tc.addr, tc.id, 5)
			assert.ErrorIs(t, err, names.ErrBadName, "admit %q %q", tc.addr, tc.id)
			assert.ErrorIs(t, c.Release(ctx, tc.addr, tc.id), names.ErrBadName)
			assert.ErrorIs(t, c.Renew(ctx, []Conn{{"10.0.0.1", "ok"}, {tc.addr, tc.id}}), names.ErrBadName)
		}
		_, err := c.Count(ctx, "nope")
		assert.ErrorIs(t, err, names.ErrBadName)
		assert.NoError(t, c.Renew(ctx, nil))
	})
}

// TestConnsKeyExpiresWithItsLeases: on Redis's own clock, a key whose
// leases nobody renews is gone one lease later.
func TestConnsKeyExpiresWithItsLeases(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	c := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix, Lease: fixed(300 * time.Millisecond)})
	const addr = "192.0.2.200"
	require.True(t, admitted(t, c, addr, "e0", 5))
	ttl := connsPTTL(t, r, r.Prefix, addr)
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, 300*time.Millisecond)
	require.Eventually(t, func() bool { return connsPTTL(t, r, r.Prefix, addr) == -2 }, 10*time.Second, 50*time.Millisecond)
}

func TestConnsKey(t *testing.T) {
	assert.Equal(t, "chatd:{ip:ip4-7f000001}:conns", connsKey(keyspace.New(""), "ip4-7f000001"))
	assert.Equal(t, "p:{ip:ip6-20010db800000000}:conns", connsKey(keyspace.New("p"), "ip6-20010db800000000"))
	assert.Equal(t, DefaultLease, NewConns(nil, ConnsConfig{Lease: fixed(time.Duration(0))}).Lease())
	assert.Equal(t, time.Second, NewConns(nil, ConnsConfig{Lease: fixed(time.Second)}).Lease())
}

// TestConnsLiveRuns: with the live runs known (ConnsConfig.Live), a lease
// of a live run counts however old, so no node renews; a lease of a run
// that left the registry stops counting at once; and a run's own fresh
// leases count by their end even before others see the run.
func TestConnsLiveRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		get  func(testing.TB) *redistest.Redis
	}{
		{"single server", redistest.Real},
		{"cluster", redistest.Cluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.get(t)
			const addr = "198.51.100.7"
			clk := newTestClock()
			var mu sync.Mutex
			runs := []string{"c-runa", "c-runb"}
			live := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return append([]string(nil), runs...)
			}
			cfg := ConnsConfig{Prefix: r.Prefix, Lease: fixed(time.Minute), Now: clk.Now, Live: live, Keep: time.Hour}
			a := NewConns(r.NewClient(t), cfg)
			b := NewConns(r.NewClient(t), cfg)
			require.True(t, admitted(t, a, addr, "c-runa-1", 3))
			require.True(t, admitted(t, a, addr, "c-runa-2", 3))
			clk.Add(10 * time.Minute) // ten leases, no renewal
			require.True(t, admitted(t, b, addr, "c-runb-1", 3))
			assert.False(t, admitted(t, b, addr, "c-runb-2", 3), "run a's two unrenewed leases still count: its node beats")
			assert.True(t, admitted(t, a, addr, "c-runa-1", 3), "a holder is admitted again at the cap")
			assert.Greater(t, connsPTTL(t, r, r.Prefix, addr), 59*time.Minute, "the key lasts Keep, not one lease")
			require.NoError(t, r.Client.PExpire(context.Background(), connsKey(keyspace.New(r.Prefix), mustRateKey(t, addr)), time.Minute).Err())
			require.NoError(t, a.Refresh(context.Background(), []Conn{{Addr: addr, ID: "c-runa-1"}, {Addr: addr, ID: "c-runa-2"}}))
			assert.Greater(t, connsPTTL(t, r, r.Prefix, addr), 59*time.Minute, "Refresh keeps the key for Keep again")

			mu.Lock()
			runs = []string{"c-runb"} // node a died: its run left the registry
			mu.Unlock()
			assert.True(t, admitted(t, b, addr, "c-runb-2", 3), "a dead run's ended lease (c-runa-2) counts no more")
			assert.False(t, admitted(t, b, addr, "c-runb-3", 3), "c-runa-1, admitted again just now, counts until its lease ends")
			clk.Add(time.Minute)
			assert.True(t, admitted(t, b, addr, "c-runb-3", 3))
			assert.False(t, admitted(t, b, addr, "c-runb-4", 3))

			require.True(t, admitted(t, a, "198.51.100.8", "c-runc-1", 1), "a run not yet in the registry")
			assert.False(t, admitted(t, b, "198.51.100.8", "c-runb-9", 1), "its fresh lease counts by its end")
		})
	}
}

func mustRateKey(t *testing.T, addr string) string {
	t.Helper()
	k, err := RateKey(addr)
	require.NoError(t, err)
	return k
}

// TestConnsMarkSparesTheFullCount: with the live runs known, an admission
// reads every lease of its address (ZRANGE) only when the mark no longer
// holds: the first, after the live runs changed, after a lease of a run
// not live ended; and still counts exactly then. A private server: the
// test counts its ZRANGEs.
func TestConnsMarkSparesTheFullCount(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	const addr = "203.0.113.9"
	clk := newTestClock()
	var mu sync.Mutex
	runs := []string{"c-runb", "c-runa"} // not sorted: Admit sorts
	setRuns := func(rs ...string) {
		mu.Lock()
		defer mu.Unlock()
		runs = rs
	}
	live := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), runs...)
	}
	cfg := ConnsConfig{Prefix: r.Prefix, Lease: fixed(time.Minute), Now: clk.Now, Live: live, Keep: time.Hour}
	a := NewConns(r.Client, cfg)
	b := NewConns(r.Client, cfg)
	reads := func() int64 { return r.Server.CommandCalls(t, "zrange") }
	unit := mustRateKey(t, addr)
	mark := connsMarkKey(keyspace.New(r.Prefix), unit)

	start := reads()
	for i := range 200 {
		require.True(t, admitted(t, a, addr, fmt.Sprintf("c-runa-%d", i), 0))
	}
	assert.Equal(t, int64(1), reads()-start, "200 admissions, one full count: the first")
	require.True(t, admitted(t, b, addr, "c-runb-0", 201))
	assert.False(t, admitted(t, b, addr, "c-runb-1", 201), "201 live leases: at the cap by ZCARD alone")
	assert.True(t, admitted(t, a, addr, "c-runa-7", 201), "a holder is admitted again at the cap")
	assert.Equal(t, int64(1), reads()-start, "no full count while the mark holds")

	clk.Add(2 * time.Minute)
	setRuns("c-runb") // node a died: its 200 leases, ended, count no more
	assert.True(t, admitted(t, b, addr, "c-runb-1", 3), "the runs changed: counted again, 1 live lease")
	assert.Equal(t, int64(2), reads()-start)
	n, err := r.Client.ZCard(ctx, connsKey(keyspace.New(r.Prefix), unit)).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n, "the dead run's leases are dropped")
	require.True(t, admitted(t, a, addr, "c-runc-0", 0), "a run not yet live: its lease counts till it ends")
	assert.False(t, admitted(t, b, addr, "c-runb-2", 3), "3 leases count")
	assert.Equal(t, int64(2), reads()-start, "a lease that counts by its end moves the mark, with no full count")
	clk.Add(time.Minute)
	assert.True(t, admitted(t, b, addr, "c-runb-2", 3), "c-runc-0's lease ended: counted again")
	assert.False(t, admitted(t, b, addr, "c-runb-3", 3))
	assert.Equal(t, int64(3), reads()-start)

	// Admit without the runs, and Renew, leave no mark: their leases count
	// by their ends, which the mark does not know.
	require.NoError(t, r.Client.Exists(ctx, mark).Err())
	plain := NewConns(r.Client, ConnsConfig{Prefix: r.Prefix, Lease: fixed(time.Minute), Now: clk.Now})
	require.True(t, admitted(t, plain, addr, "c-runb-2", 0))
	assert.Zero(t, r.Client.Exists(ctx, mark).Val(), "Admit without runs deletes the mark")
	require.True(t, admitted(t, b, addr, "c-runb-2", 0))
	assert.Equal(t, int64(1), r.Client.Exists(ctx, mark).Val())
	require.NoError(t, plain.Renew(ctx, []Conn{{addr, "c-runb-2"}}))
	assert.Zero(t, r.Client.Exists(ctx, mark).Val(), "Renew deletes the mark")
	require.True(t, admitted(t, b, addr, "c-runb-2", 0))
	mttl, err := r.Client.PTTL(ctx, mark).Result()
	require.NoError(t, err)
	assert.Greater(t, mttl, 59*time.Minute, "the mark lasts keep, as its key")
}
