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
// firing on node B (each node with its own client and bus). It reports the
// p50/p99 latency counted from the Set call and from Set's return (clamped
// at 0: with a fast bus the watcher may fire before Set has returned), and
// the share that fired before the return. BenchmarkRawPublish is the
// baseline: PUBLISH → receive on a bare go-redis subscription.
func BenchmarkPropagation(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	nodes := startNodes(b, r, 2)
	a, other := nodes[0], nodes[1]
	fired := make(chan time.Time, 1)
	other.Watch(MOTD, func(Change) { fired <- time.Now() })

	var fromCall, fromReturn []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if _, err := a.Set(ctx, MOTD, encode(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		at := <-fired
		fromCall = append(fromCall, at.Sub(start))
		fromReturn = append(fromReturn, at.Sub(returned))
	}
	report(b, fromCall, fromReturn)
}

// BenchmarkRawPublish is the baseline for BenchmarkPropagation: a bare
// PUBLISH on one client, received on another client's subscription.
func BenchmarkRawPublish(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	channel := r.Prefix + ":{settings:live}:bench"
	sub := r.NewClient(b).Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		b.Fatal(err)
	}
	msgs := sub.Channel()
	pub := r.NewClient(b)

	var fromCall, fromReturn []time.Duration
	i := 0
	for b.Loop() {
		i++
		start := time.Now()
		if err := pub.Publish(ctx, channel, strconv.Itoa(i)).Err(); err != nil {
			b.Fatal(err)
		}
		returned := time.Now()
		<-msgs
		at := time.Now()
		fromCall = append(fromCall, at.Sub(start))
		fromReturn = append(fromReturn, at.Sub(returned))
	}
	report(b, fromCall, fromReturn)
}

func report(b *testing.B, fromCall, fromReturn []time.Duration) {
	early := 0
	for i, d := range fromReturn {
		if d < 0 {
			early++
			fromReturn[i] = 0
		}
	}
	pct := func(ds []time.Duration, p float64) float64 {
		s := slices.Clone(ds)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))].Microseconds())
	}
	b.ReportMetric(pct(fromCall, 0.50), "p50-call-µs")
	b.ReportMetric(pct(fromCall, 0.99), "p99-call-µs")
	b.ReportMetric(pct(fromReturn, 0.50), "p50-return-µs")
	b.ReportMetric(pct(fromReturn, 0.99), "p99-return-µs")
	b.ReportMetric(100*float64(early)/float64(len(fromReturn)), "early-%")
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
