package identity

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

// fixed returns a live-setting func that always answers v.
func fixed[T any](v T) func() T { return func() T { return v } }

// pttl returns the remaining TTL of name's claim key.
func pttl(t *testing.T, r *redistest.Redis, name string) time.Duration {
	t.Helper()
	d, err := r.Client.PTTL(context.Background(), claimKey(keyspace.New(r.Prefix), name)).Result()
	require.NoError(t, err)
	return d
}

func TestConcurrentClaimsOneWinner(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	var nodes [3]*Registry
	for i := range nodes {
		nodes[i] = New(r.NewClient(t), Config{Prefix: r.Prefix})
	}
	const rounds = 200
	wins := [3]int{}
	for round := range rounds {
		name := "guest" + strconv.Itoa(round)
		start := make(chan struct{})
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, reg := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = reg.Claim(ctx, name, fmt.Sprintf("s%d-%d", i, round))
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: two winners: %v", round, errs)
				winner = i
				continue
			}
			require.ErrorIs(t, err, ErrNameTaken, "round %d", round)
		}
		require.NotEqual(t, -1, winner, "round %d: nobody won: %v", round, errs)
		wins[winner]++
		holder, _, err := nodes[(winner+1)%3].Holder(ctx, name)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("s%d-%d", winner, round), holder, "round %d", round)
	}
	t.Logf("wins per client over %d rounds: %v", rounds, wins)
}

func TestClaim(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	reg := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(time.Hour)})

	t.Run("a free name is claimed and carries the TTL", func(t *testing.T) {
		require.NoError(t, reg.Claim(ctx, "alice", "s1"))
		d := pttl(t, r, "alice")
		assert.Greater(t, d, 59*time.Minute)
		assert.LessOrEqual(t, d, time.Hour)
		holder, until, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s1", holder)
		assert.WithinDuration(t, time.Now().Add(time.Hour), until, time.Minute)
	})
	t.Run("another session is refused", func(t *testing.T) {
		err := reg.Claim(ctx, "alice", "s2")
		assert.ErrorIs(t, err, ErrNameTaken)
		holder, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s1", holder)
	})
	t.Run("the same session claiming again is a renewal", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, claimKey(keyspace.New(r.Prefix), "alice"), time.Minute).Err())
		require.NoError(t, reg.Claim(ctx, "alice", "s1"))
		assert.Greater(t, pttl(t, r, "alice"), 59*time.Minute)
	})
	t.Run("a release by another session deletes nothing", func(t *testing.T) {
		assert.ErrorIs(t, reg.Release(ctx, "alice", "s2"), ErrNotHolder)
		holder, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s1", holder)
		assert.Greater(t, pttl(t, r, "alice"), 59*time.Minute, "TTL untouched")
	})
	t.Run("a touch by another session renews nothing", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, claimKey(keyspace.New(r.Prefix), "alice"), time.Minute).Err())
		assert.ErrorIs(t, reg.Touch(ctx, "alice", "s2"), ErrNotHolder)
		assert.LessOrEqual(t, pttl(t, r, "alice"), time.Minute)
	})
	t.Run("the holder's release frees the name", func(t *testing.T) {
		require.NoError(t, reg.Release(ctx, "alice", "s1"))
		holder, until, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Empty(t, holder)
		assert.True(t, until.IsZero())
		assert.ErrorIs(t, reg.Touch(ctx, "alice", "s1"), ErrNotHolder, "released: not throttled into success")
		assert.ErrorIs(t, reg.Release(ctx, "alice", "s1"), ErrNotHolder, "a second release")
		require.NoError(t, reg.Claim(ctx, "alice", "s2"))
	})
	t.Run("names are independent", func(t *testing.T) {
		require.NoError(t, reg.Claim(ctx, "bob", "s1"))
		holder, _, err := reg.Holder(ctx, "bob")
		require.NoError(t, err)
		assert.Equal(t, "s1", holder)
	})
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	reg := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(ttl)})

	require.NoError(t, reg.Claim(ctx, "alice", "s1"))
	d := pttl(t, r, "alice")
	assert.Positive(t, d)
	assert.LessOrEqual(t, d, ttl)

	t.Run("expiry frees the name", func(t *testing.T) {
		require.Eventually(t, func() bool {
			h, _, err := reg.Holder(ctx, "alice")
			return err == nil && h == ""
		}, 10*time.Second, 20*time.Millisecond)
	})
	t.Run("a touch after expiry is refused and claims nothing", func(t *testing.T) {
		assert.ErrorIs(t, reg.Touch(ctx, "alice", "s1"), ErrNotHolder)
		h, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Empty(t, h)
	})
	t.Run("another session may claim it then, and the old one stays out", func(t *testing.T) {
		require.NoError(t, reg.Claim(ctx, "alice", "s2"))
		assert.ErrorIs(t, reg.Touch(ctx, "alice", "s1"), ErrNotHolder)
		assert.ErrorIs(t, reg.Release(ctx, "alice", "s1"), ErrNotHolder)
		h, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s2", h)
	})
	t.Run("touches keep a claim alive past its TTL", func(t *testing.T) {
		long := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(time.Second)})
		require.NoError(t, long.Claim(ctx, "carol", "s1"))
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			require.NoError(t, long.Touch(ctx, "carol", "s1"))
			time.Sleep(50 * time.Millisecond)
		}
		h, _, err := long.Holder(ctx, "carol")
		require.NoError(t, err)
		assert.Equal(t, "s1", h, "held 3 TTLs after the claim")
	})
}

func TestTouchThrottle(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const ttl = time.Hour
	var clock atomic.Int64 // ns since start
	start := time.Now()
	now := func() time.Time { return start.Add(time.Duration(clock.Load())) }
	reg := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(ttl), Now: now, Registerer: prometheus.NewRegistry()})
	count := func(result string) float64 {
		var m dto.Metric
		require.NoError(t, reg.calls.WithLabelValues("touch", result).Write(&m))
		return m.GetCounter().GetValue()
	}

	require.NoError(t, reg.Claim(ctx, "alice", "s1"))
	t.Run("touches within TTL/4 of the claim ask nobody", func(t *testing.T) {
		for range 100 {
			require.NoError(t, reg.Touch(ctx, "alice", "s1"))
		}
		clock.Store(int64(ttl/4 - time.Millisecond))
		require.NoError(t, reg.Touch(ctx, "alice", "s1"))
		assert.Equal(t, 101.0, count("throttled"))
		assert.Zero(t, count("renewed"))
	})
	t.Run("at TTL/4 one touch goes to Redis", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, claimKey(keyspace.New(r.Prefix), "alice"), time.Minute).Err())
		clock.Store(int64(ttl / 4))
		require.NoError(t, reg.Touch(ctx, "alice", "s1"))
		require.NoError(t, reg.Touch(ctx, "alice", "s1"))
		assert.Equal(t, 1.0, count("renewed"))
		assert.Equal(t, 102.0, count("throttled"))
		assert.Greater(t, pttl(t, r, "alice"), 59*time.Minute, "renewed to the full TTL")
	})
	t.Run("other sessions are throttled apart", func(t *testing.T) {
		assert.ErrorIs(t, reg.Touch(ctx, "alice", "s2"), ErrNotHolder)
		assert.Equal(t, 1.0, count("lost"))
	})
	t.Run("a claim lost behind the throttle is found at the next renewal", func(t *testing.T) {
		require.NoError(t, r.Client.Del(ctx, claimKey(keyspace.New(r.Prefix), "alice")).Err())
		require.NoError(t, reg.Touch(ctx, "alice", "s1"), "throttled: not asked yet")
		clock.Add(int64(ttl / 4))
		assert.ErrorIs(t, reg.Touch(ctx, "alice", "s1"), ErrNotHolder)
	})
	t.Run("the throttle forgets idle sessions", func(t *testing.T) {
		for i := range 50 {
			require.NoError(t, reg.Claim(ctx, "user"+strconv.Itoa(i), "s"))
		}
		reg.mu.Lock()
		n := len(reg.touched)
		reg.mu.Unlock()
		assert.GreaterOrEqual(t, n, 50)
		clock.Add(int64(ttl / 2))
		require.NoError(t, reg.Claim(ctx, "dave", "s"))
		reg.mu.Lock()
		n = len(reg.touched)
		reg.mu.Unlock()
		assert.Equal(t, 1, n, "only dave's recent renewal is kept")
	})
}

func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	reg := New(r.Client, Config{Prefix: r.Prefix})
	tests := []struct{ name, user, session string }{
		{"empty name", "", "s1"},
		{"name with a brace", "a}b", "s1"},
		{"long name", string(make([]byte, names.MaxUser+1)), "s1"},
		{"empty session", "alice", ""},
		{"session with a colon", "alice", "a:b"},
		{"long session", "alice", string(make([]byte, MaxSessionLen+1))},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			assert.ErrorIs(t, reg.Claim(ctx, tt.user, tt.session), names.ErrBadName)
			assert.ErrorIs(t, reg.Touch(ctx, tt.user, tt.session), names.ErrBadName)
			assert.ErrorIs(t, reg.Release(ctx, tt.user, tt.session), names.ErrBadName)
		})
	}
	_, _, err := reg.Holder(ctx, "a b")
	assert.ErrorIs(t, err, names.ErrBadName)
}

func TestDefaultTTL(t *testing.T) {
	for _, f := range []func() time.Duration{nil, fixed(time.Duration(0)), fixed(-time.Second), fixed(time.Microsecond)} {
		assert.Equal(t, DefaultTTL, New(nil, Config{TTL: f}).TTL())
	}
	assert.Equal(t, time.Minute, New(nil, Config{TTL: fixed(time.Minute)}).TTL())
}

func TestCluster(t *testing.T) {
	t.Parallel()
	r := redistest.Cluster(t)
	ctx := context.Background()
	nodes := make([]*Registry, 3)
	for i := range nodes {
		nodes[i] = New(r.NewClient(t), Config{Prefix: r.Prefix, TTL: fixed(time.Minute)})
	}
	users := []string{"alice", "bob", "carol", "dave", "erin", "frank"}
	slots := map[int]bool{}
	for i, u := range users {
		slots[keyspace.Slot(claimKey(keyspace.New(r.Prefix), u))] = true
		require.NoError(t, nodes[i%3].Claim(ctx, u, "s-"+u))
		assert.ErrorIs(t, nodes[(i+1)%3].Claim(ctx, u, "other"), ErrNameTaken, u)
		require.NoError(t, nodes[(i+2)%3].Touch(ctx, u, "s-"+u), u)
		h, until, err := nodes[(i+1)%3].Holder(ctx, u)
		require.NoError(t, err)
		assert.Equal(t, "s-"+u, h)
		assert.WithinDuration(t, time.Now().Add(time.Minute), until, 10*time.Second)
		assert.ErrorIs(t, nodes[i%3].Release(ctx, u, "other"), ErrNotHolder)
		require.NoError(t, nodes[(i+1)%3].Release(ctx, u, "s-"+u))
		require.NoError(t, nodes[(i+2)%3].Claim(ctx, u, "other"), "free again")
	}
	assert.Greater(t, len(slots), 1, "names spread over slots")
}

func TestRateKey(t *testing.T) {
	tests := []struct{ ip, want string }{
		{"127.0.0.1", "ip4-7f000001"},
		{"203.0.113.9", "ip4-cb007109"},
		{"::ffff:203.0.113.9", "ip4-cb007109"},
		{"2001:db8:1:2:3:4:5:6", "ip6-20010db800010002"},
		{"2001:db8:1:2:ffff::1", "ip6-20010db800010002"},
		{"::1", "ip6-0000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			got, err := RateKey(tt.ip)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.NoError(t, names.User(got), "a valid ratelimit key")
		})
	}
	for _, bad := range []string{"", "localhost", "1.2.3", "[::1]"} {
		_, err := RateKey(bad)
		assert.ErrorIs(t, err, names.ErrBadName, bad)
	}
}
