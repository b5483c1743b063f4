package seen

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// latencies records the duration of each benchmark op.
type latencies []time.Duration

func (l *latencies) time(fn func()) {
	start := time.Now()
	fn()
	*l = append(*l, time.Since(start))
}

func (l latencies) sum() time.Duration {
	var t time.Duration
	for _, d := range l {
		t += d
	}
	return t
}

// report reports p50 and p99 as <prefix>p50-µs and <prefix>p99-µs.
func (l latencies) report(b *testing.B, prefix string) {
	if len(l) == 0 {
		return
	}
	l = slices.Clone(l)
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Microseconds()), prefix+"p50-µs")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), prefix+"p99-µs")
}

// Each benchmark runs the filter and its raw alternative (a SET of the
// same ids) alternately in every iteration, on the same server, so both see
// the same machine load, and reports the ratio of their times (x-set: the
// filter takes x times the SET) with each one's latencies. They need a real
// redis-server (skip without one, fail under CHATD_TEST_STRICT=1): a ratio
// against miniredis says nothing of Redis.

// probe100 returns 100 items to filter: half of them marked among the first
// 10,000 ids, half never marked.
func probe100(i int) []string {
	out := make([]string, 0, 100)
	for j := range 50 {
		out = append(out, "item-"+strconv.Itoa((i*50+j)%10000), "never-"+strconv.Itoa(i*50+j))
	}
	return out
}

// BenchmarkUnseen100 filters 100 items (50 marked) for a user whose filter
// holds 10,000 items at 1%: one EVALSHA, reading the bitmaps whole (the
// default), then reading them bit by bit with GETBIT (the way bitmaps too
// large to copy are read), then the raw alternative: SMISMEMBER of the 100
// ids on a SET holding the same 10,000 ids. It reports x-set and
// getbit-x-set, and p50/p99 of each.
func BenchmarkUnseen100(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix})
	bitwise := New(r.Client, Config{Prefix: r.Prefix})
	bitwise.readWhole = 0
	all := ids("item", 0, 10000)
	markAll(b, f, "alice", all)
	key := keyspace.New(r.Prefix).Key("user", "alice", "seenset")
	for from := 0; from < len(all); from += 1000 {
		require.NoError(b, r.Client.SAdd(ctx, key, toAny(all[from:from+1000])...).Err())
	}
	var whole, getbit, set latencies
	for i := 0; b.Loop(); i++ {
		items := probe100(i)
		for _, run := range []struct {
			lat *latencies
			f   *Filter
		}{{&whole, f}, {&getbit, bitwise}} {
			run.lat.time(func() {
				got, err := run.f.Unseen(ctx, "alice", items)
				require.NoError(b, err)
				require.LessOrEqual(b, len(got), 50, "marked items are never unseen")
			})
		}
		set.time(func() { require.NoError(b, r.Client.SMIsMember(ctx, key, toAny(items)...).Err()) })
	}
	b.ReportMetric(float64(whole.sum())/float64(set.sum()), "x-set")
	b.ReportMetric(float64(getbit.sum())/float64(set.sum()), "getbit-x-set")
	whole.report(b, "")
	getbit.report(b, "getbit-")
	set.report(b, "set-")
}

// BenchmarkMark100 marks 100 new items per op (rotating every 100 ops at the
// default capacity), then SADDs 100 new ids to a SET (the raw
// alternative); it reports x-set, and items marked per second and p50/p99
// of each.
func BenchmarkMark100(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix})
	key := keyspace.New(r.Prefix).Key("user", "alice", "seenset")
	var mark, set latencies
	for i := 0; b.Loop(); i++ {
		items := ids("m"+strconv.Itoa(i), 0, 100)
		mark.time(func() { require.NoError(b, f.Mark(ctx, "alice", items)) })
		set.time(func() { require.NoError(b, r.Client.SAdd(ctx, key, toAny(items)...).Err()) })
	}
	b.ReportMetric(float64(mark.sum())/float64(set.sum()), "x-set")
	b.ReportMetric(float64(100*len(mark))/mark.sum().Seconds(), "marks/s")
	b.ReportMetric(float64(100*len(set))/set.sum().Seconds(), "set-marks/s")
	mark.report(b, "")
	set.report(b, "set-")
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
