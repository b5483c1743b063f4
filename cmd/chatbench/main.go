// Command chatbench measures chatd against the limits of the machine it
// runs on, in the same run: it starts a private redis-server, chatd nodes
// and bare Fiber hubs (unless given addresses), measures the anchors
// (redis-benchmark, raw pub/sub, a bare WebSocket hub, a bare HTTP
// handler), then drives chatd through HTTP and WebSocket only, as
// docs/PROTOCOL.md describes, and reports each figure as a ratio to its anchor,
// with repeats interleaved so the machine's drift hits both alike.
//
//	go run ./cmd/chatbench            # full run, ~10 minutes on 2 cores
//	go run ./cmd/chatbench -quick     # ~2 minutes
//	go run ./cmd/chatbench -json -strict > bench.json
//	go run ./cmd/chatbench -h         # flags and more examples
//
// See README.md beside this file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// allScenarios is every scenario a run makes by default, in run order.
var allScenarios = []string{"anchors", "fanout", "join", "leaderboard", "poll", "settings", "idle"}

// extraScenarios run only when named: anchorcheck is the fan-out's anchor
// check alone (the coalescing hub against itself with twice the senders,
// and the CPU split);
// sse is one room read over WebSockets and event streams side by side;
// conns holds -conns idle users (100,000) seated in rooms over as many
// chatd nodes and generator processes as the open-file cap needs.
// cost is Redis CPU and commands per operation next to their floors.
// rooms50 is chatd's real shape: -rooms50-users in rooms of 50, every one
// a sender, at -rooms50-rate says/s in all, against a hub with chatd's
// ingress (pipelined says), on each -rooms50-nodes count.
var extraScenarios = []string{"anchorcheck", "sse", "conns", "cost", "rooms50"}

// Options are chatbench's flags.
type Options struct {
	Nodes     int
	Quick     bool
	JSON      bool
	Redis     string
	Targets   []string
	Scenarios []string
	Repeats   int
	Dur       time.Duration
	Chatd     string
	Admin     string
	Secret    string
	Clients   []int
	Quiet     bool
	Keep      bool
	Senders   int
	Window    int
	Strict    bool
	WSBatch   bool
	Conns     int           // conns: users
	ConnsCap  int           // conns: connections per process at most
	ConnsIdle time.Duration // conns: the idle window
	Rates     []float64     // fanout: fixed delivery rates (per second); nil = ½ the goal hub's ceiling
	CostUsers int           // cost: idle WebSocket users of the renewal
	CostIdle  time.Duration // cost: the renewal's idle window
	CostOps   int           // cost: operations per say, join and poll batch
	R50Users  int           // rooms50: users, all senders, in rooms of 50
	R50Rate   float64       // rooms50: says per second, all users together
	R50Nodes  []int         // rooms50: node counts compared (each ≤ Nodes)
	R50Check  bool          // rooms50: also the hub at twice the rate

	// hidden: serve a bare hub (chatbench starts itself this way)
	serveHub string
	hubRedis string
	hubNode  string

	// hidden: serve as a conns worker (plans on stdin, answers on stdout)
	serveConns bool
}

// scale picks the full or the quick size.
func (o Options) scale(full, quick int) int {
	if o.Quick {
		return quick
	}
	return full
}

// usageHead is what -h prints before the flags.
const usageHead = `usage: chatbench [flags]   (run from the chatd checkout; needs redis-server and redis-benchmark)

Measures chatd against the limits of this machine (bare hubs, raw Redis),
measured in the same run, and prints each figure as a ratio to its anchor,
then the goals met and missed.

examples:
  go run ./cmd/chatbench -quick                                  # every scenario, ~2 minutes
  go run ./cmd/chatbench -quick -nodes 1 -scenarios fanout       # quick fan-out: bare hubs (naive, coalesced, batched) vs chatd
  go run ./cmd/chatbench -scenarios anchorcheck -nodes 1 -clients 200  # is the bare hub the limit, not chatbench?
  go run ./cmd/chatbench -nodes 1 -scenarios conns -conns 100000 # 100,000 idle users over 6 nodes and 6 generator processes
  go run ./cmd/chatbench -json -strict > bench.json              # full run (~10 min); exit 1 on a missed goal
  go run ./cmd/chatbench -scenarios rooms50 -rooms50-users 6000 -rooms50-rate 1000  # rooms of 50, all senders, vs a hub with chatd's ingress, 1 and 3 nodes

flags:
`

// hiddenFlags are chatbench's internal flags (it starts itself with them
// to serve a bare hub): they work, but -h does not list them.
var hiddenFlags = map[string]bool{"serve-hub": true, "hub-redis": true, "hub-node": true, "serve-conns": true}

// printUsage writes usageHead and every flag but the hidden ones.
func printUsage(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, usageHead)
	fs.VisitAll(func(f *flag.Flag) {
		if hiddenFlags[f.Name] {
			return
		}
		typ, usage := flag.UnquoteUsage(f)
		line := "  -" + f.Name
		if typ != "" {
			line += " " + typ
		}
		line += "\n    \t" + strings.ReplaceAll(usage, "\n", "\n    \t")
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			line += fmt.Sprintf(" (default %q)", f.DefValue)
		}
		fmt.Fprintln(w, line)
	})
}

// ParseFlags reads args into Options.
func ParseFlags(args []string, stderr io.Writer) (Options, error) {
	var o Options
	fs := flag.NewFlagSet("chatbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs, stderr) }
	fs.IntVar(&o.Nodes, "nodes", 3, "chatd nodes to start (1 or 3); ignored with -targets")
	fs.BoolVar(&o.Quick, "quick", false, "smaller sizes, fewer and shorter repeats (~2 minutes)")
	fs.BoolVar(&o.JSON, "json", false, "print the report as JSON on stdout instead of a markdown table")
	fs.StringVar(&o.Redis, "redis", "", "host:port of a Redis to use instead of starting a private redis-server (it must be the one -targets use)")
	targets := fs.String("targets", "", "comma-separated chatd base URLs (http://127.0.0.1:8080,…) instead of starting chatd nodes; needs -redis")
	scen := fs.String("scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios: "+strings.Join(allScenarios, ",")+" (the default), or also "+strings.Join(extraScenarios, ","))
	fs.IntVar(&o.Repeats, "repeats", 0, "interleaved repeats per comparison (default 5, -quick 2)")
	fs.DurationVar(&o.Dur, "dur", 0, "length of one measured run (default 3s, -quick 1s)")
	fs.StringVar(&o.Chatd, "chatd", "", "chatd binary to start (default: go build ./cmd/chatd into tmp/chatd)")
	fs.StringVar(&o.Admin, "admin-token", "adm", "admin bearer token of the chatd nodes")
	fs.StringVar(&o.Secret, "secret", "chatbench-secret-0123456789abcdef", "session secret given to the chatd nodes chatbench starts")
	clients := fs.String("clients", "", "fan-out member counts, comma-separated (default 200,2000; -quick 200); up to 200 share one room, more fill rooms of 50")
	fs.IntVar(&o.Senders, "senders", 4, "fan-out: members per room that send")
	rates := fs.String("rates", "", "fan-out: fixed rates of the latency runs, in deliveries per second, comma-separated (e.g. 400000,1000000); default half the goal hub's ceiling")
	fs.IntVar(&o.Window, "window", 32, "fan-out, saturated: says each sender keeps in flight")
	fs.BoolVar(&o.WSBatch, "ws-batch", true, "open WebSockets with ?batch=1 (a server may then send several events per frame)")
	fs.IntVar(&o.CostUsers, "cost-users", 0, "cost: idle WebSocket users of the renewal (default 5000, -quick 1000)")
	fs.DurationVar(&o.CostIdle, "cost-idle", 0, "cost: the renewal's idle window, in slices of 20s (default 60s, -quick 20s)")
	fs.IntVar(&o.CostOps, "cost-ops", 0, "cost: operations per say, join and poll batch (default 5000, -quick 1000)")
	fs.IntVar(&o.R50Users, "rooms50-users", 0, "rooms50: users, every one a sender, seated in rooms of 50 (default 6000, -quick 600)")
	fs.Float64Var(&o.R50Rate, "rooms50-rate", 1000, "rooms50: says per second of all users together, on an open-loop schedule")
	r50Nodes := fs.String("rooms50-nodes", "", "rooms50: node counts to compare chatd and the hub on, comma-separated, each at most -nodes (default 1 and -nodes)")
	fs.BoolVar(&o.R50Check, "rooms50-2x", false, "rooms50: also run the hub at twice the rate (a check that the generator has room)")
	fs.BoolVar(&o.Strict, "strict", false, "exit 1 when any goal or check is missed")
	fs.BoolVar(&o.Quiet, "quiet", false, "no progress on stderr")
	fs.BoolVar(&o.Keep, "keep-logs", false, "keep the process logs directory even after a clean run")
	fs.IntVar(&o.Conns, "conns", 0, "conns: idle users, seated in rooms of 50 (default 100000, -quick 2000)")
	fs.IntVar(&o.ConnsCap, "conns-cap", 18000, "conns: WebSockets one process may hold (chatd node or generator worker); more users start more of both (the open-file limit)")
	fs.DurationVar(&o.ConnsIdle, "conns-idle", 0, "conns: the idle window measured (default 60s, -quick 15s; chatd renews seats every 10 s, connection leases every 20 s)")
	fs.StringVar(&o.serveHub, "serve-hub", "", "internal: serve a bare hub on this address")
	fs.StringVar(&o.hubRedis, "hub-redis", "", "internal: the bare hub's Redis")
	fs.StringVar(&o.hubNode, "hub-node", "h", "internal: the bare hub's name")
	fs.BoolVar(&o.serveConns, "serve-conns", false, "internal: serve as a conns worker (JSON lines on stdin and stdout)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (see -h)", fs.Arg(0))
	}
	if o.serveHub != "" || o.serveConns {
		return o, nil
	}
	if o.Nodes != 1 && o.Nodes != 3 {
		return o, fmt.Errorf("-nodes %d: expected 1 or 3", o.Nodes)
	}
	for _, t := range strings.Split(*targets, ",") {
		if t = strings.TrimRight(strings.TrimSpace(t), "/"); t != "" {
			if !strings.HasPrefix(t, "http://127.0.0.1:") && !strings.HasPrefix(t, "http://localhost:") {
				return o, fmt.Errorf("-targets %q: chatbench only loads loopback addresses (http://127.0.0.1:PORT)", t)
			}
			o.Targets = append(o.Targets, t)
		}
	}
	if len(o.Targets) > 0 && o.Redis == "" {
		return o, errors.New("-targets needs -redis (the Redis those nodes use), for the anchors and command counts")
	}
	if o.Redis != "" {
		h, _, ok := strings.Cut(o.Redis, ":")
		if !ok || (h != "127.0.0.1" && h != "localhost") {
			return o, fmt.Errorf("-redis %q: expected 127.0.0.1:PORT", o.Redis)
		}
	}
	for _, s := range strings.Split(*scen, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) && !slices.Contains(extraScenarios, s) {
			return o, fmt.Errorf("-scenarios: unknown %q (have %s)", s, strings.Join(append(slices.Clone(allScenarios), extraScenarios...), ","))
		}
		o.Scenarios = append(o.Scenarios, s)
	}
	if o.Repeats <= 0 {
		o.Repeats = o.scale(5, 2)
	}
	if o.Dur <= 0 {
		o.Dur = time.Duration(o.scale(3000, 1000)) * time.Millisecond
	}
	if o.CostUsers <= 0 {
		o.CostUsers = o.scale(5000, 1000)
	}
	if o.CostIdle <= 0 {
		o.CostIdle = time.Duration(o.scale(60, 20)) * time.Second
	}
	if o.CostOps <= 0 {
		o.CostOps = o.scale(5000, 1000)
	}
	if *clients == "" {
		if o.Quick {
			*clients = "200"
		} else {
			*clients = "200,2000"
		}
	}
	if o.Senders < 1 || o.Window < 1 {
		return o, errors.New("-senders and -window: expected at least 1")
	}
	if o.Conns <= 0 {
		o.Conns = o.scale(100000, 2000)
	}
	if o.ConnsCap < 1 {
		return o, errors.New("-conns-cap: expected at least 1")
	}
	if ceilDiv(o.Conns, o.ConnsCap) > 250 {
		return o, fmt.Errorf("-conns %d with -conns-cap %d: more than 250 processes", o.Conns, o.ConnsCap)
	}
	if o.ConnsIdle <= 0 {
		o.ConnsIdle = time.Duration(o.scale(60, 15)) * time.Second
	}
	if o.R50Users <= 0 {
		o.R50Users = o.scale(6000, 600)
	}
	if o.R50Users > 10000 {
		return o, fmt.Errorf("-rooms50-users %d: at most 10000 (one generator process)", o.R50Users)
	}
	if !(o.R50Rate > 0 && o.R50Rate <= 100000) {
		return o, fmt.Errorf("-rooms50-rate %v: expected says per second, more than 0 and at most 100000", o.R50Rate)
	}
	if *r50Nodes == "" {
		o.R50Nodes = []int{1}
		if o.Nodes > 1 {
			o.R50Nodes = append(o.R50Nodes, o.Nodes)
		}
	} else {
		for _, f := range strings.Split(*r50Nodes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > o.Nodes {
				return o, fmt.Errorf("-rooms50-nodes %q: expected node counts 1..%d (-nodes)", f, o.Nodes)
			}
			o.R50Nodes = append(o.R50Nodes, n)
		}
	}
	if *rates != "" {
		for _, r := range strings.Split(*rates, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
			if err != nil || v <= 0 || v > 1e8 {
				return o, fmt.Errorf("-rates %q: expected deliveries per second, 1..100000000", r)
			}
			o.Rates = append(o.Rates, v)
		}
	}
	for _, c := range strings.Split(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 || n > 10000 {
			return o, fmt.Errorf("-clients %q: expected counts 1..10000", c)
		}
		o.Clients = append(o.Clients, n)
	}
	return o, nil
}

// Bench is one chatbench run.
type Bench struct {
	opt   Options
	w     *World
	api   *API
	rep   *Report
	prog  *Progress
	runID string
	seq   atomic.Int64
}

// tag returns a fresh name fragment, unique in this run and across runs.
func (b *Bench) tag(prefix string) string {
	return prefix + b.runID + strconv.FormatInt(b.seq.Add(1), 36)
}

// Run sets up the world, runs the scenarios and fills the report.
func (b *Bench) Run(ctx context.Context) error {
	raiseFileLimit()
	b.runID = strconv.FormatInt(time.Now().UnixMilli()%(36*36*36*36*36), 36)
	b.api = newAPI(256, b.opt.Admin)
	b.rep = &Report{Started: time.Now(), Command: "chatbench " + strings.Join(os.Args[1:], " "), Machine: machine()}
	b.prog = newProgress(os.Stderr, len(b.opt.Scenarios)+3, b.opt.Quiet)
	dir, err := os.MkdirTemp("", "chatbench-")
	if err != nil {
		return err
	}
	b.w = &World{Dir: dir}
	b.prog.Step("starting redis")
	if b.opt.Redis != "" {
		b.w.RedisAddr = b.opt.Redis
		if err := b.w.connectRedis(ctx, nil); err != nil {
			return err
		}
	} else if err := b.w.startRedis(ctx); err != nil {
		return err
	}
	if v, err := b.w.Redis.InfoMap(ctx, "server").Result(); err == nil {
		b.rep.Machine["redis"] = v["Server"]["redis_version"]
	}
	b.prog.Step("starting chatd")
	if len(b.opt.Targets) > 0 {
		b.w.Targets = b.opt.Targets
	} else {
		bin := b.opt.Chatd
		if bin == "" {
			root, err := moduleRoot()
			if err != nil {
				return err
			}
			b.prog.Say("go build ./cmd/chatd")
			if bin, err = buildChatd(ctx, root); err != nil {
				return err
			}
		}
		if err := b.w.startChatd(ctx, bin, b.opt.Nodes, b.opt.Secret, b.opt.Admin); err != nil {
			return err
		}
	}
	b.rep.Machine["nodes"] = fmt.Sprintf("%d chatd (%s)", len(b.w.Targets), strings.Join(b.w.Targets, ", "))
	b.prog.Step("starting bare hubs")
	if err := b.w.startHubs(ctx, len(b.w.Targets)); err != nil {
		return err
	}
	for _, s := range b.opt.Scenarios {
		if ctx.Err() != nil {
			break
		}
		b.prog.Step("%s", s)
		t0 := time.Now()
		if err := b.scenario(ctx, s); err != nil {
			b.rep.fail(s, err)
		}
		b.prog.Say("%s done in %s", s, time.Since(t0).Truncate(100*time.Millisecond))
		for _, p := range b.w.Nodes {
			if p.Exited() {
				return fmt.Errorf("chatd %s exited during %s (log %s)", p.Name, s, p.log.Name())
			}
		}
	}
	b.rep.Duration = time.Since(b.rep.Started).Truncate(time.Second).String()
	return ctx.Err()
}

func (b *Bench) scenario(ctx context.Context, s string) error {
	switch s {
	case "anchors":
		return b.scenarioAnchors(ctx)
	case "fanout":
		return b.scenarioFanout(ctx)
	case "anchorcheck":
		return b.scenarioAnchorCheck(ctx)
	case "sse":
		return b.scenarioSSE(ctx)
	case "join":
		return b.scenarioJoin(ctx)
	case "leaderboard":
		return b.scenarioBoard(ctx)
	case "poll":
		return b.scenarioPoll(ctx)
	case "settings":
		return b.scenarioSettings(ctx)
	case "idle":
		return b.scenarioIdle(ctx)
	case "conns":
		return b.scenarioConns(ctx)
	case "cost":
		return b.scenarioCost(ctx)
	case "rooms50":
		return b.scenarioRooms50(ctx)
	}
	return fmt.Errorf("unknown scenario %q", s)
}

// Close stops every process the run started and removes its logs unless
// something failed (or -keep-logs).
func (b *Bench) Close(failed bool) {
	b.prog.Done()
	if b.w == nil {
		return
	}
	b.w.Close()
	if failed || b.opt.Keep || len(b.rep.Errors) > 0 {
		fmt.Fprintf(os.Stderr, "process logs kept in %s\n", b.w.Dir)
		return
	}
	os.RemoveAll(b.w.Dir)
}

// machine describes the machine for the report header.
func machine() map[string]string {
	m := map[string]string{"nproc": strconv.Itoa(runtime.NumCPU()), "go": runtime.Version(), "mode": ""}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("redis-server", "--version").Output(); err == nil {
		m["redis-server"] = strings.TrimSpace(string(out))
	}
	return m
}

func main() {
	opt, err := ParseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chatbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if opt.serveConns {
		if err := serveConns(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "conns worker:", err)
			os.Exit(1)
		}
		return
	}
	if opt.serveHub != "" {
		if err := runHub(ctx, opt.serveHub, opt.hubRedis, opt.hubNode); err != nil {
			fmt.Fprintln(os.Stderr, "hub:", err)
			os.Exit(1)
		}
		return
	}
	wsBatch = opt.WSBatch
	b := &Bench{opt: opt}
	err = b.Run(ctx)
	b.Close(err != nil)
	if b.rep != nil {
		b.rep.Machine["mode"] = map[bool]string{true: "quick", false: "full"}[opt.Quick] +
			fmt.Sprintf(", %d repeats × %s", opt.Repeats, opt.Dur)
		b.rep.summarize()
		if opt.JSON {
			_ = b.rep.WriteJSON(os.Stdout)
			b.rep.WriteGoals(os.Stderr) // the closing summary, beside the JSON
		} else {
			b.rep.WriteTable(os.Stdout) // ends with the closing summary
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chatbench:", err)
		os.Exit(1)
	}
	if opt.Strict && b.rep != nil && b.rep.Missed() > 0 {
		fmt.Fprintf(os.Stderr, "chatbench: -strict: %d goal(s) missed\n", b.rep.Missed())
		os.Exit(1)
	}
}
