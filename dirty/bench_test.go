package dirty

import (
	"context"
	"fmt"
	"net"
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

// counter is a go-redis hook counting every command and round trip a client
// sends. The handshake go-redis sends on each new connection (HELLO, CLIENT
// SETINFO) goes through the hooks too; it is counted apart, with the
// connections dialed, since it is paid per connection, not per operation.
type counter struct{ cmds, rtts, handshake, dials atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c.dials.Add(1)
		return next(ctx, network, addr)
	}
}

// count counts cmds, sent in one round trip.
func (c *counter) count(cmds ...redis.Cmder) {
	n := 0
	for _, cmd := range cmds {
		switch cmd.Name() {
		case "hello", "client":
			c.handshake.Add(1)
		default:
			n++
		}
	}
	c.cmds.Add(int64(n))
	if n > 0 {
		c.rtts.Add(1)
	}
}

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.count(cmds...)
		return next(ctx, cmds)
	}
}

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

// serverUsec returns the microseconds the server spent so far in each
// command ([INFO] commandstats), a cost that the machine's load does not
// inflate as much as wall time.
//
// [INFO]: https://redis.io/commands/info/
func serverUsec(b *testing.B, rdb redis.UniversalClient) map[string]float64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	usec := map[string]float64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !strings.HasPrefix(line, "cmdstat_") {
			continue
		}
		_, rest, ok = strings.Cut(rest, "usec=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		f, _ := strconv.ParseFloat(v, 64)
		usec[name] = f
	}
	return usec
}

// spent is the server time in the named commands between two serverUsec
// readings.
func spent(before, after map[string]float64, cmds ...string) float64 {
	var t float64
	for _, c := range cmds {
		t += after[c] - before[c]
	}
	return t
}

// The commands of a clean poll (Open's throttled renewal: the open script
// and its pipeline; Take: the wait script) and of the naive poll: no
// command is in both, so INFO commandstats tells their server time apart
// when they run side by side.
var (
	cleanPollCmds = []string{"evalsha", "zremrangebyscore", "zadd", "pexpire"}
	naivePollCmds = []string{"hgetall", "zrange", "hget", "xrange", "zrangebyscore", "zscore"}
)

// BenchmarkPoll is the poll of a REST client when nothing changed, at 10,000
// live sessions: Open (renewal throttled) + Take, on a client of its own;
// and in the same iterations of each of 16 goroutines its baselines, each on
// a client of its own: the naive poll that reads every section, one round
// trip each (what a handler asking each package for its data would do), and
// the same seven commands in one pipeline. Every command each client sends
// is counted (go-redis hooks): clean-cmds/op is the claim, 1 command per
// clean poll (the connection handshakes are reported apart). x-naive-server is the naive poll's server time (INFO
// commandstats) over the clean poll's; x-naive and x-pipelined the wall-time
// ratios. It needs a real redis-server (skips without one, fails under
// CHATD_TEST_STRICT=1).
func BenchmarkPoll(b *testing.B) {
	r := redistest.Real(b)
	clean, naive, piped := r.NewClient(b), r.NewClient(b), r.NewClient(b)
	t := New(clean, Config{Prefix: r.Prefix, Logger: quiet})
	openSessions(b, t)
	naiveData(b, r)
	var cc, nc, pc counter
	clean.AddHook(&cc)
	naive.AddHook(&nc)
	piped.AddHook(&pc)
	var next atomic.Int64
	var cleanNs, naiveNs, pipedNs atomic.Int64
	b.SetParallelism(16)
	before := serverUsec(b, r.Client)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := int(next.Add(1) % benchSessions)
			t0 := time.Now()
			if _, err := t.Open(ctx, sessionName(i), fmt.Sprintf("user-%05d", i/2)); err != nil {
				b.Error(err)
				return
			}
			if m, err := t.Take(ctx, sessionName(i)); err != nil || m != 0 {
				b.Errorf("session %d: %s %v", i, m, err)
				return
			}
			t1 := time.Now()
			if err := naivePoll(ctx, naive, r.Prefix, i); err != nil {
				b.Error(err)
				return
			}
			t2 := time.Now()
			_, err := piped.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				return naivePoll(ctx, pipe, r.Prefix, i)
			})
			if err := ignoreNil(err); err != nil {
				b.Error(err)
				return
			}
			cleanNs.Add(int64(t1.Sub(t0)))
			naiveNs.Add(int64(t2.Sub(t1)))
			pipedNs.Add(int64(time.Since(t2)))
		}
	})
	b.StopTimer()
	after := serverUsec(b, r.Client)
	n := float64(b.N)
	cleanUsec := spent(before, after, cleanPollCmds...) / n
	naiveUsec := spent(before, after, naivePollCmds...) / (2 * n) // naive and pipelined
	b.ReportMetric(float64(cc.cmds.Load())/n, "clean-cmds/op")
	b.ReportMetric(float64(nc.cmds.Load())/n, "naive-cmds/op")
	b.ReportMetric(float64(pc.rtts.Load())/n, "pipelined-rtts/op")
	b.ReportMetric(float64(cc.handshake.Load()+nc.handshake.Load()+pc.handshake.Load()), "handshake-cmds")
	b.ReportMetric(float64(cc.dials.Load()+nc.dials.Load()+pc.dials.Load()), "dials")
	b.ReportMetric(cleanUsec, "clean-server-µs/op")
	b.ReportMetric(naiveUsec, "naive-server-µs/op")
	b.ReportMetric(naiveUsec/cleanUsec, "x-naive-server")
	b.ReportMetric(float64(naiveNs.Load())/float64(cleanNs.Load()), "x-naive")
	b.ReportMetric(float64(pipedNs.Load())/float64(cleanNs.Load()), "x-pipelined")
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

// BenchmarkMarkUsers50 marks the 100 sessions of 50 users (two round trips),
// and in the same iterations its floor, 100 bare SETBITs in one pipeline. It
// reports the commands and round trips MarkUsers sends (every command its
// client sends, counted by a hook) and x-raw, its time over the floor's. It
// needs a real redis-server.
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
	var mark, raw time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := t.MarkUsers(ctx, users, Of(Messages)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		_, err := r.Client.Pipelined(ctx, func(pipe redis.Pipeliner) error {
			for i := 0; i < 100; i++ {
				pipe.SetBit(ctx, r.Prefix+":raw:"+sessionName(i), int64(Messages), 1)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		mark, raw = mark+t1.Sub(t0), raw+time.Since(t1)
	}
	c.report(b)
	b.ReportMetric(float64(mark)/float64(raw), "x-raw")
}

// BenchmarkWakeLatency measures a long poll waiting on node A woken by a
// mark made on node B, from the mark call to Wait's return; and in the same
// iterations its floor, a PUBLISH on one client received on another's
// subscription. It reports both latency distributions and x-raw-p50/p99,
// the wake-up's over the PUBLISH's. It needs a real redis-server.
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

	ps := r.NewClient(b).Subscribe(ctx, r.Prefix+":raw")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		b.Fatal(err)
	}
	msgs := ps.Channel()
	pub := r.NewClient(b)

	wake := make([]time.Duration, 0, b.N)
	raw := make([]time.Duration, 0, b.N)
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
		wake = append(wake, (<-res).Sub(start))

		start = time.Now()
		if err := pub.Publish(ctx, r.Prefix+":raw", "x").Err(); err != nil {
			b.Fatal(err)
		}
		<-msgs
		raw = append(raw, time.Since(start))
	}
	w50, w99 := reportLatency(b, "wake", wake)
	r50, r99 := reportLatency(b, "raw", raw)
	b.ReportMetric(w50/max(r50, 1), "x-raw-p50")
	b.ReportMetric(w99/max(r99, 1), "x-raw-p99")
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

// reportLatency reports the p50 and p99 of lat as name-p50-µs and
// name-p99-µs, and returns them.
func reportLatency(b *testing.B, name string, lat []time.Duration) (p50, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	p50 = float64(lat[len(lat)/2].Microseconds())
	p99 = float64(lat[len(lat)*99/100].Microseconds())
	b.ReportMetric(p50, name+"-p50-µs")
	b.ReportMetric(p99, name+"-p99-µs")
	return p50, p99
}

func ignoreNil(err error) error {
	if err == redis.Nil {
		return nil
	}
	return err
}
