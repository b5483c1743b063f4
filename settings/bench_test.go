package settings

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkPropagation measures a change from Set on node A to the watcher
// firing on node B (each node with its own client and bus), and in the same
// iterations its baseline: a bare PUBLISH on one client received on another
// client's subscription, so both see the same machine load. For each it
// reports the p50/p99 latency counted from the call and from its return
// (clamped at 0: with a fast bus the watcher may fire before Set has
// returned) and the share that arrived before the return; x-raw-p50 and
// x-raw-p99 are Set's latencies from the call over the PUBLISH's. It needs a
// real redis-server (skips without one, fails under CHATD_TEST_STRICT=1).
func BenchmarkPropagation(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	nodes := startNodes(b, r, 2)
	a, other := nodes[0], nodes[1]
	fired := make(chan time.Time, 1)
	other.Watch(MOTD, func(Change) { fired <- time.Now() })

	channel := r.Prefix + ":{settings:live}:bench"
	sub := r.NewClient(b).Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		b.Fatal(err)
	}
	msgs := sub.Channel()
	pub := r.NewClient(b)

	var set, raw lags
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if _, err := a.Set(ctx, MOTD, encode(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		set.add(start, returned, <-fired)

		start = time.Now()
		if err := pub.Publish(ctx, channel, strconv.Itoa(i)).Err(); err != nil {
			b.Fatal(err)
		}
		returned = time.Now()
		<-msgs
		raw.add(start, returned, time.Now())
	}
	set.report(b, "set")
	raw.report(b, "raw")
	b.ReportMetric(pct(set.fromCall, 0.50)/max(pct(raw.fromCall, 0.50), 1), "x-raw-p50")
	b.ReportMetric(pct(set.fromCall, 0.99)/max(pct(raw.fromCall, 0.99), 1), "x-raw-p99")
}

// lags are the latencies of one kind of change, from the call and from its
// return.
type lags struct{ fromCall, fromReturn []time.Duration }

func (l *lags) add(start, returned, at time.Time) {
	l.fromCall = append(l.fromCall, at.Sub(start))
	l.fromReturn = append(l.fromReturn, at.Sub(returned))
}

// pct is the p-quantile of ds in µs.
func pct(ds []time.Duration, p float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))].Microseconds())
}

func (l *lags) report(b *testing.B, name string) {
	early := 0
	for i, d := range l.fromReturn {
		if d < 0 {
			early++
			l.fromReturn[i] = 0
		}
	}
	b.ReportMetric(pct(l.fromCall, 0.50), name+"-p50-call-µs")
	b.ReportMetric(pct(l.fromCall, 0.99), name+"-p99-call-µs")
	b.ReportMetric(pct(l.fromReturn, 0.50), name+"-p50-return-µs")
	b.ReportMetric(pct(l.fromReturn, 0.99), name+"-p99-return-µs")
	b.ReportMetric(100*float64(early)/float64(len(l.fromReturn)), name+"-early-%")
}

// BenchmarkRead is the hot-path read: an atomic load and a map lookup.
func BenchmarkRead(b *testing.B) {
	s := New(nil, Config{})
	b.RunParallel(func(pb *testing.PB) {
		n := 0
		for pb.Next() {
			n += s.Int(RoomCapacity)
		}
		_ = n
	})
}
