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

// latencies records the duration of each benchmark op and reports p50/p99.
type latencies []time.Duration

func (l *latencies) time(fn func()) {
	start := time.Now()
	fn()
	*l = append(*l, time.Since(start))
}

func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	slices.Sort(l)
	b.ReportMetric(float64(l[len(l)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), "p99-µs")
}

// benchRedis is a real server, or the embedded miniredis when redis-server
// is not on PATH (to see the cost of the zero-config default).
func benchRedis(b *testing.B) *redistest.Redis {
	return redistest.New(b)
}

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
// holds 10,000 items at 1%: one EVALSHA.
func BenchmarkUnseen100(b *testing.B) { benchUnseen100(b, readWholePerItem) }

// BenchmarkUnseen100GETBIT is BenchmarkUnseen100 reading bit by bit (the way
// bitmaps too large to copy are read).
func BenchmarkUnseen100GETBIT(b *testing.B) { benchUnseen100(b, 0) }

func benchUnseen100(b *testing.B, readWhole int) {
	r := benchRedis(b)
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix})
	f.readWhole = readWhole
	markAll(b, f, "alice", ids("item", 0, 10000))
	var lat latencies
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		items := probe100(i)
		lat.time(func() {
			got, err := f.Unseen(ctx, "alice", items)
			require.NoError(b, err)
			require.LessOrEqual(b, len(got), 50, "marked items are never unseen")
		})
	}
	lat.report(b)
}

// BenchmarkBaselineSMISMEMBER100 is the raw alternative: SMISMEMBER of 100
// ids on a SET holding the same 10,000 ids.
func BenchmarkBaselineSMISMEMBER100(b *testing.B) {
	r := benchRedis(b)
	ctx := context.Background()
	key := keyspace.New(r.Prefix).Key("user", "alice", "seenset")
	all := ids("item", 0, 10000)
	for from := 0; from < len(all); from += 1000 {
		require.NoError(b, r.Client.SAdd(ctx, key, toAny(all[from:from+1000])...).Err())
	}
	var lat latencies
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		items := toAny(probe100(i))
		lat.time(func() {
			require.NoError(b, r.Client.SMIsMember(ctx, key, items...).Err())
		})
	}
	lat.report(b)
}

// BenchmarkMark100 marks 100 new items per op (rotating every 100 ops at the
// default capacity), and reports items marked per second.
func BenchmarkMark100(b *testing.B) {
	r := benchRedis(b)
	ctx := context.Background()
	f := New(r.Client, Config{Prefix: r.Prefix})
	var lat latencies
	start := time.Now()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		items := ids("m"+strconv.Itoa(i), 0, 100)
		lat.time(func() { require.NoError(b, f.Mark(ctx, "alice", items)) })
	}
	b.ReportMetric(float64(100*len(lat))/time.Since(start).Seconds(), "marks/s")
	lat.report(b)
}

// BenchmarkBaselineSADD100 is the raw alternative: SADD of 100 ids to a SET.
func BenchmarkBaselineSADD100(b *testing.B) {
	r := benchRedis(b)
	ctx := context.Background()
	key := keyspace.New(r.Prefix).Key("user", "alice", "seenset")
	var lat latencies
	start := time.Now()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		items := toAny(ids("m"+strconv.Itoa(i), 0, 100))
		lat.time(func() { require.NoError(b, r.Client.SAdd(ctx, key, items...).Err()) })
	}
	b.ReportMetric(float64(100*len(lat))/time.Since(start).Seconds(), "marks/s")
	lat.report(b)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
