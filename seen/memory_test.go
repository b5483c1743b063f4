package seen

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// userBytes returns what user's filter takes in Redis: MEMORY USAGE (exact,
// SAMPLES 0) of its description and of each kept generation's bitmap.
func userBytes(t testing.TB, r *redistest.Redis, f *Filter, user string) (total int64, gens []meta) {
	t.Helper()
	ctx := context.Background()
	s := keyspace.New(r.Prefix)
	usage := func(key string) int64 {
		n, err := r.Client.MemoryUsage(ctx, key, 0).Result()
		require.NoError(t, err, key)
		return n
	}
	gens = generations(t, r.Client, r.Prefix, user)
	total = usage(metaKey(s, user))
	for _, g := range gens {
		total += usage(bitsKey(s, user, g.g%f.slots))
	}
	return total, gens
}

// TestBytesPerUser logs the memory one user's filter takes at 10,000 items
// and 1% after 1, 100, 10,000 and 30,000 marks, against a SET of the same
// ids (MEMORY USAGE, exact).
func TestBytesPerUser(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	s := keyspace.New(r.Prefix)
	const capacity = 10000
	// ids shaped like stream ids, as notices have
	all := make([]string, 3*capacity)
	for i := range all {
		all[i] = strconv.FormatInt(1_780_000_000_000+int64(i)*7919, 10) + "-0"
	}
	f := New(r.Client, Config{Prefix: r.Prefix, Capacity: fixed(capacity), FPRate: fixed(0.01)})
	setKey := s.Key("user", "alice", "seenset")
	marked := 0
	for _, n := range []int{1, 100, capacity, 3 * capacity} {
		markAll(t, f, "alice", all[marked:n])
		for from := marked; from < n; from += 1000 {
			require.NoError(t, r.Client.SAdd(ctx, setKey, toAny(all[from:min(n, from+1000)])...).Err())
		}
		marked = n
		bytes, gens := userBytes(t, r, f, "alice")
		set, err := r.Client.MemoryUsage(ctx, setKey, 0).Result()
		require.NoError(t, err)
		t.Logf("after %6d marks: filter %6d bytes in %d generations %v, SET %7d bytes", n, bytes, len(gens), gens, set)
		switch n {
		case 1:
			assert.Less(t, bytes, int64(600), "one small generation")
		case 100:
			assert.Less(t, bytes, int64(600), "still the first generation")
		case capacity:
			assert.Less(t, bytes, set/10)
		case 3 * capacity:
			m := sizeOf(t, capacity, 0.01, DefaultGenerations, 99).m
			assert.Less(t, bytes, int64(2*m/8+1500), "two full-size generations, as the fixed-size design kept")
		}
	}
}

// usedMemory returns INFO memory's used_memory.
func usedMemory(t *testing.T, r *redistest.Redis) int64 {
	t.Helper()
	info, err := r.Client.Info(context.Background(), "memory").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no used_memory in %q", info)
	return 0
}

// TestThousandUsersOneMarkEach: a user's first mark allocates one small
// generation (FirstCapacity items), not a bitmap sized for seen.capacity.
// Before scalable filters, 1,000 such users raised used_memory by 14.7 MB.
func TestThousandUsersOneMarkEach(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix}) // seen.capacity 10,000 at 1%
	require.NoError(t, f.Mark(ctx, "warmup", []string{"x"}))
	before := usedMemory(t, r)
	const users = 1000
	for i := range users {
		require.NoError(t, f.Mark(ctx, "user"+strconv.Itoa(i), []string{"notice-1"}))
	}
	grown := usedMemory(t, r) - before
	t.Logf("used_memory grew by %d bytes for %d users with one mark each: %d bytes a user", grown, users, grown/users)
	assert.Less(t, grown, int64(1<<20), "under 1 MiB")
	n, err := r.Client.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(2*(users+1)), n, "two keys a user")
}
