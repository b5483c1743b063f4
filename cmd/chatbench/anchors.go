package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/rooms"
)

// benchRow is one row of redis-benchmark's --csv output.
type benchRow struct {
	Test string
	RPS  float64
	P50  float64 // ms
	P99  float64 // ms
}

// parseBenchCSV parses redis-benchmark --csv output (a header line, then
// one quoted row per test).
func parseBenchCSV(b []byte) ([]benchRow, error) {
	recs, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark csv: %w", err)
	}
	if len(recs) == 0 || len(recs[0]) < 2 || recs[0][0] != "test" || recs[0][1] != "rps" {
		return nil, fmt.Errorf("redis-benchmark csv: unexpected header in %.200q", b)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	var out []benchRow
	for _, r := range recs[1:] {
		if len(r) != len(recs[0]) {
			return nil, fmt.Errorf("redis-benchmark csv: row %q has %d fields, header %d", r, len(r), len(recs[0]))
		}
		row := benchRow{Test: r[0]}
		if row.RPS, err = strconv.ParseFloat(r[col["rps"]], 64); err != nil {
			return nil, fmt.Errorf("redis-benchmark csv: rps %q: %w", r[col["rps"]], err)
		}
		if i, ok := col["p50_latency_ms"]; ok {
			row.P50, _ = strconv.ParseFloat(r[i], 64)
		}
		if i, ok := col["p99_latency_ms"]; ok {
			row.P99, _ = strconv.ParseFloat(r[i], 64)
		}
		out = append(out, row)
	}
	return out, nil
}

// redisBenchmark runs redis-benchmark against the world's Redis.
func (b *Bench) redisBenchmark(ctx context.Context, n, pipeline int, args ...string) ([]benchRow, error) {
	host, port, _ := strings.Cut(b.w.RedisAddr, ":")
	all := append([]string{"-h", host, "-p", port, "-n", strconv.Itoa(n), "-c", "50", "-r", "100000",
		"-P", strconv.Itoa(pipeline), "--csv"}, args...)
	cmd := exec.CommandContext(ctx, "redis-benchmark", all...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("redis-benchmark %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return parseBenchCSV(out)
}

// anchorRedis is A1: the raw command rates of this Redis on this machine.
func (b *Bench) anchorRedis(ctx context.Context) error {
	if _, err := exec.LookPath("redis-benchmark"); err != nil {
		return errors.New("redis-benchmark not found (Debian package redis-tools); A1 skipped")
	}
	payload := strings.Repeat("x", 100)
	cases := []struct {
		name string
		args []string
	}{
		{"", []string{"-t", "set,incr"}},
		{"PUBLISH", []string{"PUBLISH", "bench:ch", payload}},
		{"ZINCRBY", []string{"ZINCRBY", "bench:z", "1", "p:__rand_int__"}},
		{"ZREVRANK", []string{"ZREVRANK", "bench:z", "p:__rand_int__"}},
		{"GETDEL", []string{"GETDEL", "bench:d:__rand_int__"}},
	}
	for _, p := range []int{1, 16} {
		n := b.opt.scale(40000, 10000)
		if p > 1 {
			n *= 5
		}
		for _, c := range cases {
			b.prog.Say("A1 redis-benchmark %s -P %d", strings.Join(c.args, " "), p)
			rows, err := b.redisBenchmark(ctx, n, p, c.args...)
			if err != nil {
				return err
			}
			for _, r := range rows {
				name := r.Test
				if c.name != "" {
					name = c.name
				}
				row := newRow("A1 redis-benchmark", fmt.Sprintf("%s -P %d", name, p), "ops/s", []float64{r.RPS})
				if p == 1 {
					row.note("p50 %.3g ms, p99 %.3g ms (50 conns)", r.P50, r.P99)
				}
				b.rep.add(row)
			}
		}
	}
	return nil
}

// seatClaims is the raw seat-claim anchor: n rooms.Seats.Join calls (chatd's
// seat_claim.lua EVALSHA, plus room creation under the lock when a lobby
// is full) from k goroutines straight on Redis, no HTTP. It returns
// joins/s.
func (b *Bench) seatClaims(ctx context.Context, n, k, capacity int) (float64, error) {
	svc, err := rooms.New(b.w.Redis, rooms.Config{Prefix: "chatbench", Capacity: func() int { return capacity }})
	if err != nil {
		return 0, err
	}
	tag := b.tag("s")
	lobby := "sc-" + tag
	t0 := time.Now()
	err = parallel(ctx, n, k, func(i int) error {
		user := fmt.Sprintf("%sx%d", tag, i)
		_, err := svc.Seats.Join(ctx, lobby, user, rooms.Attach{ID: "ws:bench:" + user})
		return err
	})
	return float64(n) / time.Since(t0).Seconds(), err
}

// pubsubRun is A2: raw Redis pub/sub fan-out with go-redis. Three
// subscriber connections (three "nodes") each subscribe to 4 channels;
// publishers PUBLISH a payload stamped with the send time, as fast as 16
// goroutines can (rate 0) or at rate per second. It returns deliveries per
// second and, at a fixed rate, the publish→receive latency.
func (b *Bench) pubsubRun(ctx context.Context, rate float64, dur time.Duration) (float64, Summary, error) {
	const nodes, channels = 3, 4
	tag := b.tag("p")
	chans := make([]string, channels)
	for i := range chans {
		chans[i] = "bench:" + tag + ":" + strconv.Itoa(i)
	}
	var (
		got  atomic.Int64
		lat  Lat
		subs []*redis.PubSub
		wg   sync.WaitGroup
	)
	for range nodes {
		c := redis.NewClient(&redis.Options{Addr: b.w.RedisAddr})
		defer c.Close()
		ps := c.Subscribe(ctx, chans...)
		for range channels { // the confirmations: every subscription is live
			if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
				return 0, Summary{}, fmt.Errorf("A2 subscribe: %w", err)
			}
		}
		subs = append(subs, ps)
		wg.Go(func() {
			var mine []int64
			defer func() { lat.AddAll(mine) }()
			for {
				m, err := ps.ReceiveMessage(ctx)
				if err != nil {
					return
				}
				now := time.Now().UnixNano()
				got.Add(1)
				if rate > 0 {
					ts, _, _ := strings.Cut(m.Payload, " ")
					if v, err := strconv.ParseInt(ts, 10, 64); err == nil {
						mine = append(mine, now-v)
					}
				}
			}
		})
	}
	pad := strings.Repeat("x", 100)
	t0 := time.Now()
	end := t0.Add(dur)
	var pubs sync.WaitGroup
	var published atomic.Int64
	if rate <= 0 {
		for g := range 16 {
			pubs.Go(func() {
				for i := g; time.Now().Before(end) && ctx.Err() == nil; i++ {
					if b.w.Redis.Publish(ctx, chans[i%channels], strconv.FormatInt(time.Now().UnixNano(), 10)+" "+pad).Err() == nil {
						published.Add(1)
					}
				}
			})
		}
	} else {
		iv := time.Duration(float64(time.Second) / rate)
		pubs.Go(func() {
			for i := 0; ; i++ {
				at := t0.Add(time.Duration(i) * iv)
				if !at.Before(end) || ctx.Err() != nil {
					return
				}
				time.Sleep(time.Until(at))
				if b.w.Redis.Publish(ctx, chans[i%channels], strconv.FormatInt(time.Now().UnixNano(), 10)+" "+pad).Err() == nil {
					published.Add(1)
				}
			}
		})
	}
	pubs.Wait()
	elapsed := time.Since(t0)
	perSec := float64(got.Load()) / elapsed.Seconds()
	want := published.Load() * nodes
	waitFor(ctx, 5*time.Second, func() bool { return got.Load() >= want })
	for _, ps := range subs {
		ps.Close()
	}
	wg.Wait()
	if got.Load() != want {
		b.rep.check("A2 pub/sub", "every published message received by every subscriber", false, "%d of %d", got.Load(), want)
	}
	return perSec, lat.Summary(), nil
}

// httpRate is A5's method: k workers GET url with keep-alive for dur; it
// returns requests per second.
func (b *Bench) httpRate(ctx context.Context, url string, k int, dur time.Duration) (float64, error) {
	var n atomic.Int64
	var firstErr error
	var mu sync.Mutex
	end := time.Now().Add(dur)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				if _, err := b.api.Do(ctx, http.MethodGet, url, "", nil, nil); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / time.Since(t0).Seconds(), firstErr
}
