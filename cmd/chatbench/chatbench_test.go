package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary serve a bare hub or be a conns worker, as
// the chatbench binary does when a world starts hubs (it re-executes
// itself with -serve-hub) or the conns scenario its workers (-serve-conns).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "-serve-hub" || os.Args[1] == "-serve-conns") {
		os.Args = append([]string{"chatbench"}, os.Args[1:]...)
		main()
		return
	}
	os.Exit(m.Run())
}

func TestParseBenchCSV(t *testing.T) {
	t.Parallel()
	t.Run("rows of a real run are read", func(t *testing.T) {
		out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"SET","55555.55","0.595","0.080","0.367","1.167","4.039","23.439"
"ZINCRBY bz 1 p:__rand_int__","180180.17","4.158","0.568","4.095","6.815","8.735","8.991"
`
		rows, err := parseBenchCSV([]byte(out))
		require.NoError(t, err)
		assert.Equal(t, []benchRow{
			{Test: "SET", RPS: 55555.55, P50: 0.367, P99: 4.039},
			{Test: "ZINCRBY bz 1 p:__rand_int__", RPS: 180180.17, P50: 4.095, P99: 8.735},
		}, rows)
	})
	t.Run("an unexpected header is an error", func(t *testing.T) {
		_, err := parseBenchCSV([]byte("SET: 1234.5 requests per second\n"))
		assert.Error(t, err)
	})
	t.Run("a non-numeric rate is an error", func(t *testing.T) {
		_, err := parseBenchCSV([]byte("\"test\",\"rps\"\n\"SET\",\"fast\"\n"))
		assert.Error(t, err)
	})
	t.Run("a short row is an error", func(t *testing.T) {
		_, err := parseBenchCSV([]byte("\"test\",\"rps\",\"p50_latency_ms\"\n\"SET\",\"1\"\n"))
		assert.Error(t, err)
	})
}

func TestStats(t *testing.T) {
	t.Parallel()
	t.Run("median of odd and even counts", func(t *testing.T) {
		assert.Equal(t, 2.0, median([]float64{3, 1, 2}))
		assert.Equal(t, 2.5, median([]float64{4, 1, 3, 2}))
		assert.True(t, math.IsNaN(median(nil)))
	})
	t.Run("quantiles use the nearest rank", func(t *testing.T) {
		s := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		assert.Equal(t, int64(5), quantileSorted(s, 0.5))
		assert.Equal(t, int64(10), quantileSorted(s, 0.99))
		assert.Equal(t, int64(1), quantileSorted(s, 0))
	})
	t.Run("summary is in milliseconds", func(t *testing.T) {
		var l Lat
		for i := 1; i <= 100; i++ {
			l.Add(time.Duration(i) * time.Millisecond)
		}
		assert.Equal(t, Summary{N: 100, P50: 50, P99: 99, P999: 100, Max: 100}, l.Summary())
	})
	t.Run("spread is range over median", func(t *testing.T) {
		assert.InDelta(t, 0.5, spread([]float64{8, 10, 13}), 1e-9)
		assert.Zero(t, spread([]float64{7}))
	})
	t.Run("ratios pair repeats and skip zero anchors", func(t *testing.T) {
		assert.Equal(t, []float64{2, 0.5}, ratios([]float64{4, 1, 9}, []float64{2, 2, 0}))
	})
	t.Run("repeats interleave A B then B A", func(t *testing.T) {
		assert.Equal(t, [][]int{{0, 1}, {1, 0}, {0, 1}}, order(3, 2))
	})
	t.Run("rooms are rounded up", func(t *testing.T) {
		assert.Equal(t, 200, roomsFor(10000, 50))
		assert.Equal(t, 3, roomsFor(101, 50))
	})
}

func TestRow(t *testing.T) {
	t.Parallel()
	t.Run("a ratio row flags a wide spread and judges its goal", func(t *testing.T) {
		r := newRow("s", "m", "msg/s", []float64{60, 80, 100}).vs("a", []float64{100, 100, 100}).goalRatio(true, 0.6)
		assert.Equal(t, 0.8, r.RatioMedian)
		assert.InDelta(t, 0.5, r.Spread, 1e-9)
		assert.True(t, r.Noisy)
		require.NotNil(t, r.OK)
		assert.True(t, *r.OK)
	})
	t.Run("a value goal at most", func(t *testing.T) {
		r := newRow("s", "m", "KiB", []float64{20}).goalValue(false, 16)
		require.NotNil(t, r.OK)
		assert.False(t, *r.OK)
	})
	t.Run("the table and JSON carry every row", func(t *testing.T) {
		rp := &Report{Machine: map[string]string{"nproc": "2"}}
		rp.add(newRow("s", "m", "u", []float64{1234567}))
		rp.add(newRow("s", "empty", "u", nil))
		rp.check("s", "c", false, "why %d", 1)
		var tb, js bytes.Buffer
		rp.WriteTable(&tb)
		require.NoError(t, rp.WriteJSON(&js))
		assert.Contains(t, tb.String(), "| s | m (u) | 1,234,567 |")
		assert.Contains(t, tb.String(), "| s | c | **no** | why 1 |")
		assert.Contains(t, js.String(), `"median": 1234567`)
	})
}

func TestFmtNum(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0", 0.01234: "0.0123", 5.5: "5.5", 12.34: "12.3", 123.4: "123", 1234.5: "1,234", -98765: "-98,765", math.NaN(): "–"} {
		assert.Equal(t, want, fmtNum(in), "%v", in)
	}
}

func TestDecodeFrame(t *testing.T) {
	t.Parallel()
	var f Frame
	require.NoError(t, decodeFrame([]byte(`{"type":"joined","room":{"id":"g-1","lobby":"g","seq":1,"capacity":50,"members":["a"]}}`), &f))
	assert.Equal(t, Room{ID: "g-1", Lobby: "g", Seq: 1, Capacity: 50, Members: []string{"a"}}, f.Room)
	require.NoError(t, decodeFrame([]byte(`{"type":"presence","room":"g-1","user":"a","state":"left"}`), &f))
	assert.Equal(t, "g-1", f.RoomID)
	require.NoError(t, decodeFrame([]byte(`{"type":"message","message":{"id":"1","room":"g-1","from":"a","text":"hi","ts":"2026-12-01T11:01:25.123Z"}}`), &f))
	assert.Equal(t, "hi", f.Msg.Text)
	require.NoError(t, decodeFrame([]byte(`{"type":"error","code":"too_long","message":"shorter","ref":"r1"}`), &f))
	assert.Equal(t, "shorter", f.ErrText)
	assert.Equal(t, "r1", f.Ref)
	assert.Error(t, decodeFrame([]byte(`{"room":"x"}`), &f), "no type")
	assert.Error(t, decodeFrame([]byte(`{"type":"joined","room":"x"}`), &f), "a joined room must be an object")
}

func TestParseFlags(t *testing.T) {
	t.Parallel()
	var sink bytes.Buffer
	t.Run("defaults run everything on 3 nodes", func(t *testing.T) {
		o, err := ParseFlags(nil, &sink)
		require.NoError(t, err)
		assert.Equal(t, 3, o.Nodes)
		assert.Equal(t, allScenarios, o.Scenarios)
		assert.Equal(t, []int{200, 2000}, o.Clients)
		assert.Equal(t, 5, o.Repeats)
	})
	t.Run("rooms50 compares 1 node and all of them", func(t *testing.T) {
		o, err := ParseFlags([]string{"-scenarios", "rooms50"}, &sink)
		require.NoError(t, err)
		assert.Equal(t, []int{1, 3}, o.R50Nodes)
		assert.Equal(t, 6000, o.R50Users)
		assert.Equal(t, 1000.0, o.R50Rate)
	})
	t.Run("quick is smaller", func(t *testing.T) {
		o, err := ParseFlags([]string{"-quick", "-scenarios", "join,poll"}, &sink)
		require.NoError(t, err)
		assert.Equal(t, []int{200}, o.Clients)
		assert.Equal(t, 2, o.Repeats)
		assert.Equal(t, []string{"join", "poll"}, o.Scenarios)
	})
	for name, args := range map[string][]string{
		"two nodes are refused":          {"-nodes", "2"},
		"an unknown scenario is refused": {"-scenarios", "fanout,chaos"},
		"a remote target is refused":     {"-targets", "http://example.com:80", "-redis", "127.0.0.1:6379"},
		"targets without redis":          {"-targets", "http://127.0.0.1:8080"},
		"a remote redis is refused":      {"-redis", "10.0.0.1:6379"},
		"rooms50 on more nodes than run": {"-nodes", "1", "-rooms50-nodes", "1,3"},
		"rooms50 at no rate":             {"-rooms50-rate", "0"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFlags(args, &sink)
			assert.Error(t, err)
		})
	}
}

// TestFanoutOnBareHub drives the fan-out client against an in-process
// bare hub without Redis: every message reaches every member once.
func TestFanoutOnBareHub(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := freeAddr()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- runHub(ctx, addr, "", "t") }()
	defer func() { cancel(); <-done }()
	p := &Proc{Name: "hub", URL: "http://" + addr}
	require.NoError(t, waitHTTP(ctx, p, "/healthz", 10*time.Second))

	b := &Bench{opt: Options{Quiet: true}, api: newAPI(8, ""), rep: &Report{}, prog: newProgress(os.Stderr, 0, true), runID: "t"}
	t.Run("saturated run loses nothing", func(t *testing.T) {
		r, err := b.fanout(ctx, fanSpec{label: "sat", targets: []string{p.URL}, clients: 60, window: 2, dur: 300 * time.Millisecond})
		require.NoError(t, err)
		assert.Equal(t, 2, r.Rooms)
		assert.Equal(t, 50, r.MaxMembers)
		assert.Equal(t, 8, r.Senders, "4 per room")
		assert.True(t, r.Lossless(), "%+v", r)
		assert.Positive(t, r.Delivered)
	})
	t.Run("one room of 120 with 8 senders loses nothing", func(t *testing.T) {
		r, err := b.fanout(ctx, fanSpec{label: "one room", targets: []string{p.URL}, clients: 120, roomSize: 120, senders: 8, window: 4, dur: 300 * time.Millisecond})
		require.NoError(t, err)
		assert.Equal(t, 1, r.Rooms)
		assert.Equal(t, 8, r.Senders)
		assert.True(t, r.Lossless(), "%+v", r)
		assert.Equal(t, r.Acked*120, r.Delivered)
		assert.GreaterOrEqual(t, r.GenCPU, 0.0, "this process's CPU is readable")
	})
	for _, mode := range []string{"naive", "coalesce", "batch"} {
		t.Run("one room of 120, "+mode+" writes, loses nothing", func(t *testing.T) {
			r, err := b.fanout(ctx, fanSpec{label: mode, targets: []string{p.URL}, write: mode, clients: 120, roomSize: 120, senders: 8, window: 8, dur: 300 * time.Millisecond})
			require.NoError(t, err)
			assert.True(t, r.Lossless(), "%+v", r)
			assert.Positive(t, r.Delivered)
			assert.Equal(t, r.Acked*120, r.Delivered)
		})
	}
	t.Run("fixed-rate run samples latency and times acks", func(t *testing.T) {
		r, err := b.fanout(ctx, fanSpec{label: "fixed", targets: []string{p.URL}, clients: 20, rate: 100, sample: 1, dur: 300 * time.Millisecond})
		require.NoError(t, err)
		assert.True(t, r.Lossless(), "%+v", r)
		assert.Equal(t, int(r.Delivered), r.Lat.N, "sample 1: every delivery")
		assert.Equal(t, int(r.Acked), r.AckLat.N)
		assert.Positive(t, r.AckLat.P50)
		r, err = b.fanout(ctx, fanSpec{label: "fixed", targets: []string{p.URL}, clients: 20, rate: 100, dur: 300 * time.Millisecond})
		require.NoError(t, err)
		assert.True(t, r.Lossless(), "%+v", r)
		assert.InDelta(t, r.Delivered/16, r.Lat.N, 21, "1 in 16 per member")
	})
}

// runBench runs chatbench with args (its flags) against a private
// redis-server and chatd built from this checkout, within limit, and
// returns the finished Bench; it skips under -short, and without
// redis-server unless CHATD_TEST_STRICT=1, where that fails.
func runBench(t *testing.T, limit time.Duration, args ...string) *Bench {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts chatd")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CHATD_TEST_STRICT") == "1" {
			t.Fatal("redis-server not on PATH (CHATD_TEST_STRICT=1)")
		}
		t.Skip("redis-server not on PATH")
	}
	opt, err := ParseFlags(args, os.Stderr)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	b := &Bench{opt: opt}
	err = b.Run(ctx)
	b.Close(err != nil)
	require.NoError(t, err)
	return b
}

// TestSmokeQuick runs chatbench end to end, quick, one scenario, against
// a private redis-server and one chatd built from this checkout.
func TestSmokeQuick(t *testing.T) {
	// every scenario once, briefly, so none can rot: what it checks here is
	// correctness (zero loss, rooms, answers), not speed — the goals and the
	// anchor check need a quiet machine and a build without -race
	b := runBench(t, 6*time.Minute, "-quick", "-nodes", "1", "-scenarios", "anchors,fanout,join,leaderboard,poll,settings,idle",
		"-clients", "100", "-repeats", "1", "-dur", "500ms", "-quiet")
	assert.Empty(t, b.rep.Errors)
	var metrics []string
	for _, r := range b.rep.Rows {
		metrics = append(metrics, r.Metric)
	}
	assert.Contains(t, strings.Join(metrics, "\n"), "PUT → last client has it, p99")
	scenarios := map[string]bool{}
	for _, r := range b.rep.Rows {
		scenarios[r.Scenario] = true
	}
	assert.GreaterOrEqual(t, len(scenarios), 6, "every scenario ran: %v", scenarios)
	// the fan-out measured the three hub write modes and chatd, checked the
	// goal hub (batched: the client opens ?batch=1) against the generator,
	// and stated its goals against it
	all := strings.Join(metrics, "\n")
	for _, m := range []string{"A4 bare hub×1 on Redis, naive", "A4 bare hub×1 on Redis, coalesced", "A4 bare hub×1 on Redis, batched",
		"anchor check: A4 hub×1 batched with 2× senders per room", "chatd×1: delivered, saturated"} {
		assert.Contains(t, all, m)
	}
	var goalAnchors []string
	for _, r := range b.rep.Rows {
		if strings.HasPrefix(r.Scenario, "fan-out") && r.OK != nil {
			goalAnchors = append(goalAnchors, r.Anchor)
		}
	}
	assert.NotEmpty(t, goalAnchors)
	for _, a := range goalAnchors {
		assert.Contains(t, []string{"A4 hub×1 batched", "chatd×1"}, a, "every fan-out goal is against the coalescing hub (or, 1 vs N nodes, chatd×1)")
	}
	for _, c := range b.rep.Checks {
		if strings.Contains(c.What, "bounded by") {
			continue // a speed check: not under -race on a shared machine
		}
		assert.True(t, c.OK, "%s: %s: %s", c.Scenario, c.What, c.Detail)
	}
}

// TestConnsScenario runs the conns scenario small: 150 users with at most
// 60 connections a process, so it must start 2 more chatd nodes and 3
// workers, each dialling from its own loopback addresses; everyone is
// seated, the wave reaches every member once, and the figures are sane.
func TestConnsScenario(t *testing.T) {
	b := runBench(t, 3*time.Minute, "-nodes", "1", "-scenarios", "conns", "-conns", "150", "-conns-cap", "60", "-conns-idle", "3s", "-quiet")
	require.Empty(t, b.rep.Errors)
	rows := map[string]*Row{}
	for _, r := range b.rep.Rows {
		rows[r.Metric] = r
	}
	val := func(metric string) float64 {
		t.Helper()
		r, ok := rows[metric]
		require.True(t, ok, "row %q", metric)
		return r.Median
	}
	assert.Equal(t, 3.0, val("chatd nodes used"))
	assert.Contains(t, rows["chatd nodes used"].Note, "50, 50, 50")
	assert.Greater(t, val("time to connect and seat all"), 0.0)
	assert.Greater(t, val("connect-and-seat rate"), 0.0)
	assert.Greater(t, val("chatd RSS per connection"), 0.0)
	assert.Less(t, val("chatd RSS per connection"), 1024.0, "KiB")
	assert.Greater(t, val("chatd goroutines per connection"), 0.5, "a reader at least")
	assert.Greater(t, val("Redis commands per second"), 0.0, "leases and presence are renewed while idle")
	assert.GreaterOrEqual(t, val("Redis CPU per 100,000 users"), 0.0)
	assert.Greater(t, val("generator RSS, workers"), 0.0)
	assert.Greater(t, val("send → receive max"), 0.0)
	assert.GreaterOrEqual(t, val("send → receive max"), val("send → receive p50"))
	assert.Greater(t, val("bare hub RSS per connection"), 0.0)
	assert.Equal(t, "bare hub (A3)", rows["chatd RSS per connection vs the bare hub"].Anchor)
	assert.Contains(t, rows["send → receive p50"].Note, "150 deliveries")
	require.Len(t, b.rep.Checks, 4)
	for _, c := range b.rep.Checks {
		assert.True(t, c.OK, "%s: %s: %s", c.Scenario, c.What, c.Detail)
	}
}

// TestCostQuick runs the cost scenario with tiny sizes against a private
// redis-server and one chatd: every row is there, and its figures and its
// floor's are positive and finite.
func TestCostQuick(t *testing.T) {
	// 10.5 s idle holds at least one seat and one presence tick (every 10 s)
	b := runBench(t, 2*time.Minute, "-quick", "-nodes", "1", "-scenarios", "cost", "-repeats", "1",
		"-cost-users", "60", "-cost-idle", "10500ms", "-cost-ops", "200", "-quiet")
	require.Empty(t, b.rep.Errors)
	rows := map[string]*Row{}
	for _, r := range b.rep.Rows {
		rows[r.Scenario+" | "+r.Metric] = r
	}
	find := func(scen, metric string) *Row {
		t.Helper()
		for k, r := range rows {
			if strings.HasPrefix(k, "cost: "+scen) && strings.Contains(r.Metric, metric) {
				return r
			}
		}
		t.Fatalf("no row %q in %q; rows: %v", metric, scen, rows)
		return nil
	}
	positive := func(r *Row, xs []float64) {
		t.Helper()
		require.NotEmpty(t, xs, "%s: %s", r.Scenario, r.Metric)
		for _, x := range xs {
			assert.False(t, math.IsNaN(x) || math.IsInf(x, 0), "%s: %s: %v", r.Scenario, r.Metric, xs)
			assert.Positive(t, x, "%s: %s: %v", r.Scenario, r.Metric, xs)
		}
	}
	for _, op := range []string{"say", "join", "clean poll"} {
		for _, m := range []string{"Redis CPU per " + op, "Redis commands per " + op, "Redis total_commands_processed per " + op} {
			r := find(op, m)
			positive(r, r.Values)
			require.NotEmpty(t, r.Anchor, "%s is next to its floor", m)
			positive(r, r.AnchorValues)
		}
	}
	cpu := find("say", "Redis CPU per say")
	require.NotNil(t, cpu.OK, "the say's CPU has its goal")
	assert.Equal(t, "ratio ≤ 2", cpu.Goal)
	// finite: an idle figure is a difference of two runs' Redis CPU, and
	// idle costs so little now that a noisy machine can make the
	// difference negative in a quick run; that is noise, not a defect.
	finite := func(r *Row, xs []float64) {
		t.Helper()
		require.NotEmpty(t, xs, "%s: %s", r.Scenario, r.Metric)
		for _, x := range xs {
			assert.False(t, math.IsNaN(x) || math.IsInf(x, 0), "%s: %s: %v", r.Scenario, r.Metric, xs)
		}
	}
	for _, m := range []string{"Redis CPU per idle user per minute", "Redis commands per idle user per minute"} {
		r := find("renewal", m)
		check := positive
		if strings.Contains(m, "CPU") {
			check = finite
		}
		check(r, r.Values)
		check(r, r.AnchorValues)
	}
	for _, m := range []string{"idle Redis commands per second per 100 connected users", "idle Redis CPU scaled to 100,000"} {
		r := find("renewal", m)
		if strings.Contains(m, "CPU") {
			finite(r, r.Values)
		} else {
			positive(r, r.Values)
		}
		require.NotNil(t, r.OK, "%s has its goal", m)
	}
	for _, c := range b.rep.Checks {
		assert.True(t, c.OK, "%s: %s: %s", c.Scenario, c.What, c.Detail)
	}
}

// TestRooms50Quick runs the rooms50 scenario small — 200 users in rooms of
// 50, every one a sender, at 100 says/s, on 1 and 3 nodes — against chatd
// built from this checkout and hubs with chatd's ingress: every figure of
// both sides is there and positive, nothing is lost, duplicated or
// reordered, and the goals are stated against the hub. Speed is not
// judged here (-race, a shared machine).
func TestRooms50Quick(t *testing.T) {
	b := runBench(t, 4*time.Minute, "-nodes", "3", "-scenarios", "rooms50", "-rooms50-users", "200", "-rooms50-rate", "100",
		"-repeats", "1", "-dur", "1500ms", "-quiet")
	require.Empty(t, b.rep.Errors)
	for _, nn := range []int{1, 3} {
		scen := fmt.Sprintf("rooms of 50: 200 users, 100 says/s, %d node(s)", nn)
		chatd, hub := fmt.Sprintf("chatd×%d", nn), fmt.Sprintf("hub×%d (chatd's ingress)", nn)
		rows := map[string]*Row{}
		for _, r := range b.rep.Rows {
			if r.Scenario == scen {
				rows[r.Metric] = r
			}
		}
		for _, m := range []string{"server CPU per delivery (/proc, all nodes)", "Redis CPU per say (/proc of redis-server)",
			"Redis CPU per say (INFO cpu, context)", "Redis commands per say (INFO commandstats)",
			"send→receive p50", "send→receive p99", "send→receive p99.9", "delivered"} {
			r, ok := rows[chatd+": "+m]
			require.True(t, ok, "%s: row %q; rows %v", scen, m, rows)
			assert.Equal(t, hub, r.Anchor, m)
			for _, xs := range [][]float64{r.Values, r.AnchorValues} {
				require.Len(t, xs, 1, m)
				assert.False(t, math.IsNaN(xs[0]) || math.IsInf(xs[0], 0), "%s: %v", m, xs)
				assert.Positive(t, xs[0], "%s: %v", m, xs)
			}
		}
		for m, goal := range map[string]string{"send→receive p99": "ratio ≤ 1.5", "server CPU per delivery (/proc, all nodes)": "ratio ≤ 1.15",
			"Redis CPU per say (/proc of redis-server)": "ratio ≤ 2"} {
			assert.Equal(t, goal, rows[chatd+": "+m].Goal, m)
		}
		assert.InDelta(t, 50*100, rows[chatd+": delivered"].Median, 50*100*0.5, "every say reaches 50 members")
		for _, v := range []string{chatd, hub} {
			r, ok := rows[v+": generator send lag behind its schedule, p99"]
			require.True(t, ok, "%s: the generator's lag", v)
			assert.Contains(t, r.Note, "of the CPU the run used")
		}
		var checks int
		for _, c := range b.rep.Checks {
			if c.Scenario != scen || strings.Contains(c.What, "kept its schedule") {
				continue // a speed check: not under -race on a shared machine
			}
			checks++
			assert.True(t, c.OK, "%s: %s: %s", c.Scenario, c.What, c.Detail)
		}
		assert.Equal(t, 4, checks, "loss and rooms, for chatd and the hub")
	}
}
