package identity

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
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

// hour is a token expiry an hour from now.
func hour() time.Time { return time.Now().Add(time.Hour) }

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
	t.Run("another holder is refused", func(t *testing.T) {
		err := reg.Claim(ctx, "alice", "s2")
		assert.ErrorIs(t, err, ErrNameTaken)
		assert.Equal(t, errcode.NameTaken, errcode.Of(err))
		holder, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s1", holder)
	})
	t.Run("the same holder claiming again is a renewal", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, claimKey(keyspace.New(r.Prefix), "alice"), time.Minute).Err())
		require.NoError(t, reg.Claim(ctx, "alice", "s1"))
		assert.Greater(t, pttl(t, r, "alice"), 59*time.Minute)
	})
	t.Run("an admit by another holder renews nothing and is refused", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, claimKey(keyspace.New(r.Prefix), "alice"), time.Minute).Err())
		err := reg.Admit(ctx, "alice", "s3", hour())
		assert.ErrorIs(t, err, ErrNotHolder)
		assert.Equal(t, errcode.BadToken, errcode.Of(err))
		assert.Equal(t, "This session has ended: the name was taken by another guest after being idle; sign in again", errcode.Message(err))
		assert.LessOrEqual(t, pttl(t, r, "alice"), time.Minute)
	})
	t.Run("a release by another holder deletes nothing, and signs that one out", func(t *testing.T) {
		require.NoError(t, reg.Release(ctx, "alice", "s2", hour()))
		holder, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s1", holder)
		assert.ErrorIs(t, reg.Claim(ctx, "alice", "s2"), ErrSignedOut, "s2 signed out of alice")
	})
	t.Run("the holder's release frees the name, and the holder stays out", func(t *testing.T) {
		require.NoError(t, reg.Release(ctx, "alice", "s1", hour()))
		holder, until, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Empty(t, holder)
		assert.True(t, until.IsZero())
		err = reg.Admit(ctx, "alice", "s1", hour())
		assert.ErrorIs(t, err, ErrSignedOut, "released: not taken back")
		assert.Equal(t, "This session was signed out; sign in again", errcode.Message(err))
		assert.ErrorIs(t, reg.Claim(ctx, "alice", "s1"), ErrSignedOut)
		require.NoError(t, reg.Release(ctx, "alice", "s1", hour()), "a second release")
		require.NoError(t, reg.Claim(ctx, "alice", "s4"))
	})
	t.Run("a release needs the token's expiry", func(t *testing.T) {
		assert.ErrorIs(t, reg.Release(ctx, "alice", "s4", time.Time{}), ErrBadExpiry)
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
	waitFree := func(name string) {
		t.Helper()
		require.Eventually(t, func() bool {
			h, _, err := reg.Holder(ctx, name)
			return err == nil && h == ""
		}, 10*time.Second, 20*time.Millisecond)
	}

	t.Run("expiry frees the name", func(t *testing.T) { waitFree("alice") })
	t.Run("an admit after expiry takes the free name back", func(t *testing.T) {
		require.NoError(t, reg.Admit(ctx, "alice", "s1", hour()))
		h, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s1", h)
	})
	t.Run("another holder may claim it once free, and the old one stays out", func(t *testing.T) {
		waitFree("alice")
		require.NoError(t, reg.Claim(ctx, "alice", "s2"))
		assert.ErrorIs(t, reg.Admit(ctx, "alice", "s1", hour()), ErrNotHolder)
		require.NoError(t, reg.Release(ctx, "alice", "s1", hour()))
		h, _, err := reg.Holder(ctx, "alice")
		require.NoError(t, err)
		assert.Equal(t, "s2", h, "the old holder's sign-out frees nothing of the new one's")
	})
	t.Run("admits keep a claim alive past its TTL", func(t *testing.T) {
		long := New(r.Client, Config{Prefix: r.Prefix, TTL: fixed(time.Second)})
		require.NoError(t, long.Claim(ctx, "carol", "s1"))
		deadline := time.Now().Add(3 * time.Second)
		for time.Now().Before(deadline) {
			require.NoError(t, long.Admit(ctx, "carol", "s1", hour()))
			time.Sleep(50 * time.Millisecond)
		}
		h, _, err := long.Holder(ctx, "carol")
		require.NoError(t, err)
		assert.Equal(t, "s1", h, "held 3 TTLs after the claim")
	})
}

func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	reg := New(r.Client, Config{Prefix: r.Prefix})
	tests := []struct{ name, user, holder string }{
		{"empty name", "", "s1"},
		{"name with a brace", "a}b", "s1"},
		{"long name", string(make([]byte, names.MaxUser+1)), "s1"},
		{"empty holder", "alice", ""},
		{"holder with a colon", "alice", "a:b"},
		{"long holder", "alice", string(make([]byte, MaxSessionLen+1))},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is refused", func(t *testing.T) {
			assert.ErrorIs(t, reg.Claim(ctx, tt.user, tt.holder), names.ErrBadName)
			assert.ErrorIs(t, reg.Admit(ctx, tt.user, tt.holder, hour()), names.ErrBadName)
			assert.ErrorIs(t, reg.Release(ctx, tt.user, tt.holder, hour()), names.ErrBadName)
			assert.Equal(t, errcode.BadName, errcode.Of(reg.Claim(ctx, tt.user, tt.holder)))
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
		ks := keyspace.New(r.Prefix)
		slots[keyspace.Slot(claimKey(ks, u))] = true
		require.Equal(t, keyspace.Slot(claimKey(ks, u)), keyspace.Slot(revokedKey(ks, u)))
		require.NoError(t, nodes[i%3].Claim(ctx, u, "s-"+u))
		assert.ErrorIs(t, nodes[(i+1)%3].Claim(ctx, strings.ToUpper(u), "other"), ErrNameTaken, u)
		require.NoError(t, nodes[(i+2)%3].Admit(ctx, u, "s-"+u, hour()), u)
		h, until, err := nodes[(i+1)%3].Holder(ctx, u)
		require.NoError(t, err)
		assert.Equal(t, "s-"+u, h)
		assert.WithinDuration(t, time.Now().Add(time.Minute), until, 10*time.Second)
		assert.ErrorIs(t, nodes[i%3].Admit(ctx, u, "other", hour()), ErrNotHolder)
		require.NoError(t, nodes[(i+1)%3].Release(ctx, u, "s-"+u, hour()))
		assert.ErrorIs(t, nodes[(i+2)%3].Admit(ctx, u, "s-"+u, hour()), ErrSignedOut, "revoked in Redis: another node learns it there")
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
