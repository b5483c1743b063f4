package dirty

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redistest"
)

const benchSessions = 10_000

// counter is a go-redis hook counting the commands and round trips a client
// sends.
type counter struct{ cmds, rtts atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		c.rtts.Add(1)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.cmds.Add(int64(len(cmds)))
		c.rtts.Add(1)
		return next(ctx, cmds)
	}
}

func (c *counter) reset() { c.cmds.Store(0); c.rtts.Store(0) }

func (c *counter) report(b *testing.B) {
	b.ReportMetric(float64(c.cmds.Load())/float64(b.N), "cmds/op")
	b.ReportMetric(float64(c.rtts.Load())/float64(b.N), "rtts/op")
}

func sessionName(i int) string { return fmt.Sprintf("sess-%05d", i) }

// openSessions opens benchSessions sessions (users of two sessions each) and
// takes their first mask, so they are live and clean.
func openSessions(b *testing.B, t *Tracker) {
	b.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < benchSessions; i += 8 {
				if _, err := t.Open(ctx, sessionName(i), fmt.Sprintf("user-%05d", i/2)); err != nil {
					b.Error(err)
					return
				}
				if _, err := t.Take(ctx, sessionName(i)); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// serverUsec returns the microseconds the server spent in commands so far
// ([INFO] commandstats), a cost that the machine's load does not inflate as
// much as wall time.
//
// [INFO]: https://redis.io/commands/info/
func serverUsec(b *testing.B, rdb redis.UniversalClient) float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, ",usec=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		f, _ := strconv.ParseFloat(v, 64)
		total += f
	}
	return total
}

// pollParallel runs poll from many goroutines over the live sessions and
// reports polls per second and the server time per poll.
func pollParallel(b *testing.B, rdb redis.UniversalClient, poll func(ctx context.Context, i int) error) {
	var next atomic.Int64
	b.SetParallelism(16)
	before := serverUsec(b, rdb)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := int(next.Add(1) % benchSessions)
			if err := poll(ctx, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "polls/s")
	b.ReportMetric((serverUsec(b, rdb)-before)/float64(b.N), "server-µs/op")
}

// BenchmarkPollClean is the poll of a REST client when nothing changed, at
// 10,000 live sessions: Open (renewal throttled) + Take.
func BenchmarkPollClean(b *testing.B) {
	r := redistest.Real(b)
	rdb := r.NewClient(b)
	t := New(rdb, Config{Prefix: r.Prefix, Logger: quiet})
	openSessions(b, t)
	var c counter
	rdb.AddHook(&c)
	pollParallel(b, rdb, func(ctx context.Context, i int) error {
		if _, err := t.Open(ctx, sessionName(i), fmt.Sprintf("user-%05d", i/2)); err != nil {
			return err
		}
		m, err := t.Take(ctx, sessionName(i))
		if err == nil && m != 0 {
			err = fmt.Errorf("session %d dirty: %s", i, m)
		}
		return err
	})
	c.report(b)
}

// BenchmarkRawGetDel is the floor: a bare GETDEL of a missing key.
func BenchmarkRawGetDel(b *testing.B) {
	r := redistest.Real(b)
	rdb := r.NewClient(b)
	var c counter
	rdb.AddHook(&c)
	pollParallel(b, rdb, func(ctx context.Context, i int) error {
		return ignoreNil(rdb.GetDel(ctx, r.Prefix+":raw:"+sessionName(i)).Err())
	})
	c.report(b)
}

// naiveData writes what a naive poll reads: settings, 200 rooms of 50
// members with 20 messages each, a wallet and a cursor per user, notices, a
// board.
func naiveData(b *testing.B, r *redistest.Redis) {
	b.Helper()
	ctx := context.Background()
	p := r.Prefix
	_, err := r.Client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for k := 0; k < 10; k++ {
			pipe.HSet(ctx, p+":settings", fmt.Sprintf("key%d", k), k)
		}
		for k := 0; k < 10; k++ {
			pipe.ZAdd(ctx, p+":notices", redis.Z{Score: float64(k), Member: fmt.Sprintf("notice %d", k)})
		}
		for room := 0; room < benchSessions/50; room++ {
			for m := 0; m < 20; m++ {
				pipe.XAdd(ctx, &redis.XAddArgs{Stream: fmt.Sprintf("%s:room:%d:msgs", p, room), ID: fmt.Sprintf("%d-0", m+1), Values: []any{"user", "x", "text", "hello"}})
			}
		}
		for i := 0; i < benchSessions; i++ {
			pipe.ZAdd(ctx, fmt.Sprintf("%s:room:%d:members", p, i/50), redis.Z{Score: 1, Member: sessionName(i)})
			pipe.HSet(ctx, fmt.Sprintf("%s:wallet:%d", p, i), "coins", 100)
			pipe.HSet(ctx, fmt.Sprintf("%s:cursor:%d", p, i), "room", "20-0")
			pipe.ZAdd(ctx, p+":board", redis.Z{Score: float64(i), Member: sessionName(i)})
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

// naivePoll queries every section, one command each, as a handler that
// asks each package for its data would: 7 round trips.
func naivePoll(ctx context.Context, rdb redis.Cmdable, p string, i int) error {
	room := fmt.Sprintf("%s:room:%d", p, i/50)
	errs := []error{
		rdb.HGetAll(ctx, p+":settings").Err(),
		rdb.ZRange(ctx, room+":members", 0, -1).Err(),
		ignoreNil(rdb.HGet(ctx, fmt.Sprintf("%s:cursor:%d", p, i), "room").Err()),
		rdb.XRange(ctx, room+":msgs", "(20-0", "+").Err(),
		rdb.HGetAll(ctx, fmt.Sprintf("%s:wallet:%d", p, i)).Err(),
		rdb.ZRangeByScore(ctx, p+":notices", &redis.ZRangeBy{Min: "(9", Max: "+inf"}).Err(),
		ignoreNil(rdb.ZScore(ctx, p+":board", sessionName(i)).Err()),
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkNaivePoll reads every section on every poll, one round trip each.
func BenchmarkNaivePoll(b *testing.B) {
	r := redistest.Real(b)
	naiveData(b, r)
	rdb := r.NewClient(b)
	var c counter
	rdb.AddHook(&c)
	pollParallel(b, rdb, func(ctx context.Context, i int) error { return naivePoll(ctx, rdb, r.Prefix, i) })
	c.report(b)
}

// BenchmarkNaivePollPipelined is the naive poll at its best: the same seven
// commands in one pipeline.
func BenchmarkNaivePollPipelined(b *testing.B) {
	r := redistest.Real(b)
	naiveData(b, r)
	rdb := r.NewClient(b)
	var c counter
	rdb.AddHook(&c)
	pollParallel(b, rdb, func(ctx context.Context, i int) error {
		_, err := rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			return naivePoll(ctx, pipe, r.Prefix, i)
		})
		return ignoreNil(err)
	})
	c.report(b)
}

// BenchmarkMarkUsers50 marks the 100 sessions of 50 users: two round trips.
func BenchmarkMarkUsers50(b *testing.B) {
	r := redistest.Real(b)
	rdb := r.NewClient(b)
	t := New(rdb, Config{Prefix: r.Prefix, Logger: quiet})
	ctx := context.Background()
	users := make([]string, 50)
	for u := range users {
		users[u] = fmt.Sprintf("user-%05d", u)
		for s := 0; s < 2; s++ {
			if _, err := t.Open(ctx, sessionName(2*u+s), users[u]); err != nil {
				b.Fatal(err)
			}
		}
	}
	var c counter
	rdb.AddHook(&c)
	b.ResetTimer()
	for b.Loop() {
		if err := t.MarkUsers(ctx, users, Of(Messages)); err != nil {
			b.Fatal(err)
		}
	}
	c.report(b)
}

// BenchmarkRawSetBitPipeline100 is the floor of MarkUsers50: 100 bare
// SETBITs in one pipeline.
func BenchmarkRawSetBitPipeline100(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	for b.Loop() {
		_, err := r.Client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i := 0; i < 100; i++ {
				pipe.SetBit(ctx, r.Prefix+":raw:"+sessionName(i), int64(Messages), 1)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWakeLatency measures a long poll waiting on node A woken by a
// mark made on node B: from the mark call to Wait's return.
func BenchmarkWakeLatency(b *testing.B) {
	r := redistest.Real(b)
	n := nodes(b, r, 2, Config{})
	ctx := context.Background()
	if _, err := n[0].Open(ctx, "lp", "lp-user"); err != nil {
		b.Fatal(err)
	}
	if _, err := n[0].Take(ctx, "lp"); err != nil {
		b.Fatal(err)
	}
	if err := waitScript.Load(ctx, n[0].rdb).Err(); err != nil {
		b.Fatal(err)
	}
	reg := &registrations{sha: waitScript.Hash(), ch: make(chan struct{}, 1)}
	n[0].rdb.AddHook(reg)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		res := make(chan time.Time, 1)
		go func() {
			if m, err := n[0].Wait(ctx, "lp", 10*time.Second); err != nil || m == 0 {
				b.Errorf("wait: %s %v", m, err)
			}
			res <- time.Now()
		}()
		select {
		case <-reg.ch: // registered as waiting
		case <-time.After(10 * time.Second):
			b.Fatal("the long poll did not register")
		}
		start := time.Now()
		if err := n[1].MarkSessions(ctx, []string{"lp"}, Of(Messages)); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-res).Sub(start))
	}
	reportLatency(b, lat)
}

// registrations signals each clean wait script: a poll is registered.
type registrations struct {
	sha string
	ch  chan struct{}
}

func (h *registrations) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *registrations) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if args := cmd.Args(); len(args) > 1 && strings.EqualFold(fmt.Sprint(args[0]), "evalsha") && args[1] == h.sha && err == redis.Nil {
			h.ch <- struct{}{}
		}
		return err
	}
}

func (h *registrations) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// BenchmarkRawPubSubLatency is the floor of BenchmarkWakeLatency: a PUBLISH
// on one client received on another's subscription.
func BenchmarkRawPubSubLatency(b *testing.B) {
	r := redistest.Real(b)
	ctx := context.Background()
	ps := r.NewClient(b).Subscribe(ctx, r.Prefix+":raw")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		b.Fatal(err)
	}
	msgs := ps.Channel()
	pub := r.NewClient(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if err := pub.Publish(ctx, r.Prefix+":raw", "x").Err(); err != nil {
			b.Fatal(err)
		}
		<-msgs
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func ignoreNil(err error) error {
	if err == redis.Nil {
		return nil
	}
	return err
}
