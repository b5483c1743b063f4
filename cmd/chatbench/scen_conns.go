package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// connsLobbySize is how many users of the conns scenario share a lobby
// (rooms of room.capacity, 50 by default, fill it: 20 rooms).
const connsLobbySize = 1000

// connsWorkerProc is one -serve-conns worker as the parent drives it.
type connsWorkerProc struct {
	p     *Proc
	in    io.WriteCloser
	msgs  chan connsMsg
	first int // its first user
	count int // its users
}

// plan writes one plan line to the worker.
func (wp *connsWorkerProc) plan(p connsPlan) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if _, err := wp.in.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("worker %s: %w", wp.p.Name, err)
	}
	return nil
}

// await returns the worker's next answer of type typ, handing progress
// answers to onProgress; an "error" answer or the worker's end is an error.
func (wp *connsWorkerProc) await(ctx context.Context, typ string, limit time.Duration, onProgress func(done int)) (connsMsg, error) {
	timeout := time.After(limit)
	for {
		select {
		case m, ok := <-wp.msgs:
			if !ok {
				return m, fmt.Errorf("worker %s ended (see %s)", wp.p.Name, wp.p.log.Name())
			}
			switch m.Type {
			case typ:
				return m, nil
			case "progress":
				if onProgress != nil {
					onProgress(m.Done)
				}
			case "error":
				return m, fmt.Errorf("worker %s: %s", wp.p.Name, m.Err)
			}
		case <-timeout:
			return connsMsg{}, fmt.Errorf("worker %s: no %s answer in %s", wp.p.Name, typ, limit)
		case <-ctx.Done():
			return connsMsg{}, ctx.Err()
		}
	}
}

// startConnsWorker re-executes chatbench with -serve-conns, its stderr to
// dir/name.log, talking JSON lines over its stdin and stdout.
func startConnsWorker(dir, name string) (*connsWorkerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	lf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-serve-conns")
	cmd.Stderr = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		lf.Close()
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		lf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, log: lf, done: make(chan struct{})}
	wp := &connsWorkerProc{p: p, in: in, msgs: make(chan connsMsg, 64)}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(wp.msgs)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			var m connsMsg
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = connsMsg{Type: "error", Err: fmt.Sprintf("answer %.80q: %v", sc.Bytes(), err)}
			}
			wp.msgs <- m
		}
	}()
	// Wait only after the pipe is read to its end (os/exec's rule)
	go func() { <-readDone; p.err = cmd.Wait(); close(p.done) }()
	return wp, nil
}

// stop closes the worker's stdin (it closes its connections and exits)
// and waits for it, killing it after grace.
func (wp *connsWorkerProc) stop(grace time.Duration) {
	wp.in.Close()
	select {
	case <-wp.p.done:
		wp.p.log.Close()
	case <-time.After(grace):
		wp.p.Stop(time.Second)
	}
}

// nodeSample is what the conns scenario reads of one server process.
type nodeSample struct {
	rss, heap, goroutines float64 // bytes, bytes, count; -1 unknown
}

// sampleNode reads p's VmRSS and, when metrics, its /metrics'
// go_memstats_heap_inuse_bytes and go_goroutines.
func sampleNode(ctx context.Context, p *Proc, metrics bool) (nodeSample, error) {
	s := nodeSample{-1, -1, -1}
	rss, err := p.RSS()
	if err != nil {
		return s, fmt.Errorf("%s RSS: %w", p.Name, err)
	}
	s.rss = float64(rss)
	if !metrics {
		return s, nil
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return s, fmt.Errorf("%s /metrics: %w", p.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("%s /metrics: HTTP %d", p.Name, resp.StatusCode)
	}
	m, err := parseMetrics(resp.Body, "go_memstats_heap_inuse_bytes", "go_goroutines")
	if err != nil {
		return s, fmt.Errorf("%s /metrics: %w", p.Name, err)
	}
	s.heap, s.goroutines = m["go_memstats_heap_inuse_bytes"], m["go_goroutines"]
	return s, nil
}

// parseMetrics reads the values of the unlabelled samples names from a
// Prometheus text exposition; a name it does not find is an error.
func parseMetrics(r io.Reader, names ...string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("no %s", n)
		}
	}
	return out, nil
}

// connsSource is worker w's n loopback source addresses for phase (0
// chatd, 1 the bare hub), one per user as on the Internet, where what a
// server keeps per client address (chatd's connection leases) is kept per
// user: 127.(w+1).(phase×128 + k/254).(k%254 + 1). The whole 127/8 is
// local on Linux, and a phase does not reuse the ports the previous one
// left in TIME_WAIT. n is at most 128 × 254 = 32,512.
func connsSource(w, phase, n int) []string {
	s := make([]string, 0, n)
	for k := range min(n, 128*254) {
		s = append(s, fmt.Sprintf("127.%d.%d.%d", w+1, phase*128+k/254, k%254+1))
	}
	return s
}

// connsSettle is how long the idle window waits after the last join: the
// joins' own work settles, and every node runs a presence tick (10 s) and
// a heartbeat (5 s) in between, so the window sees the steady state.
const connsSettle = 12 * time.Second

// connsSettings are the settings the conns scenario lifts for its run (0 =
// no cap) and resets after: one address (the generator) opens every
// session and socket, and a node holds up to -conns-cap sockets.
var connsSettings = []string{"limit.connections_per_ip", "limit.sessions_per_ip_per_minute", "limit.connections_per_node"}

// scenarioConns: N idle WebSockets seated in rooms of 50, spread over as
// many chatd nodes and generator processes as the per-process open-file
// cap needs; per-connection memory and goroutines, Redis commands and CPU
// while idle, one message per room, and the same idle measure on the bare
// hub.
func (b *Bench) scenarioConns(ctx context.Context) error {
	if len(b.w.Nodes) == 0 {
		return errors.New("conns: needs chatd processes chatbench started (their pids, and more nodes); skipped with -targets")
	}
	n, capN := b.opt.Conns, b.opt.ConnsCap
	// Each process may hold at most its open-file limit (raised to the hard
	// one at start, which children inherit), less room for its Redis pool,
	// listeners and logs.
	files := fileLimit()
	if files > 0 && capN > files-1000 {
		capN = files - 1000
		if capN < 100 {
			return fmt.Errorf("conns: the open-file limit is %d per process: too low to hold connections (raise it: ulimit -n)", files)
		}
		b.prog.Say("conns: at most %d connections per process (the open-file limit is %d)", capN, files)
	}
	nNodes := max(len(b.w.Nodes), ceilDiv(n, capN))
	nWorkers := ceilDiv(n, capN)
	scen := fmt.Sprintf("conns, %d users on %d chatd nodes", n, nNodes)

	// nodes: the run's, then more
	nodes := slices.Clone(b.w.Nodes)
	if extra := nNodes - len(nodes); extra > 0 {
		b.prog.Say("conns: starting %d more chatd nodes (at most %d connections per process)", extra, capN)
		ps, err := b.w.addChatd(ctx, extra)
		if err != nil {
			return fmt.Errorf("conns: more nodes: %w", err)
		}
		defer func() {
			for _, p := range ps {
				p.Stop(10 * time.Second)
			}
		}()
		nodes = append(nodes, ps...)
	}
	bases := make([]string, len(nodes))
	for i, p := range nodes {
		bases[i] = p.URL
	}
	for _, key := range connsSettings {
		if _, err := b.api.SetSetting(ctx, bases[0], key, 0); err != nil {
			return fmt.Errorf("conns: lift %s: %w", key, err)
		}
	}
	defer func() {
		for _, key := range connsSettings[2:] { // the per-address caps stay lifted for the run (startChatd)
			if err := b.api.ResetSetting(context.WithoutCancel(ctx), bases[0], key); err != nil {
				b.rep.fail("conns", fmt.Errorf("reset %s: %w", key, err))
			}
		}
	}()

	// workers
	workers := make([]*connsWorkerProc, nWorkers)
	defer func() {
		for _, wp := range workers {
			if wp != nil {
				wp.stop(15 * time.Second)
			}
		}
	}()
	per := ceilDiv(n, nWorkers)
	for i := range workers {
		wp, err := startConnsWorker(b.w.Dir, fmt.Sprintf("cw%d", i+1))
		if err != nil {
			return fmt.Errorf("conns: %w", err)
		}
		wp.first, wp.count = i*per, min(per, n-i*per)
		workers[i] = wp
	}
	var genPids []int
	for _, wp := range workers {
		genPids = append(genPids, wp.p.Pid())
	}

	// baseline, before any connection: the nodes' memory, and what Redis
	// does for nodes with nobody on them (heartbeats, sweeps, the
	// matchmaker's rounds: per node, not per user)
	base0, err := b.sampleNodes(ctx, nodes, true)
	if err != nil {
		return err
	}
	bgFor := time.Duration(b.opt.scale(10, 5)) * time.Second
	b.prog.Say("conns: Redis background with nobody connected, %s", bgFor)
	g0, err := b.redisUsage(ctx)
	if err != nil {
		return fmt.Errorf("conns: redis: %w", err)
	}
	tg := time.Now()
	if err := sleepCtx(ctx, bgFor); err != nil {
		return err
	}
	g1, err := b.redisUsage(ctx)
	if err != nil {
		return fmt.Errorf("conns: redis: %w", err)
	}
	bgSecs := time.Since(tg).Seconds()
	bgCmds, bgCores := float64(g1.processed-g0.processed)/bgSecs, (g1.cpuUs-g0.cpuUs)/1e6/bgSecs

	// phase connect
	tag := b.tag("c")
	b.prog.Say("conns: %d users → %d nodes from %d workers", n, len(nodes), nWorkers)
	connected, took, err := b.connsConnect(ctx, workers, connsPlan{Prefix: tag, Bases: bases, Lobby: tag, LobbySize: connsLobbySize, Session: true, Parallel: 16}, 0)
	if err != nil {
		return err
	}
	failures, firstErrs := 0, []string{}
	for _, m := range connected {
		failures += m.Failures
		firstErrs = append(firstErrs, m.FirstErrors...)
	}
	perNode := make([]int, len(nodes))
	for i := range n {
		perNode[i%len(nodes)]++
	}
	b.rep.add(newRow(scen, "time to connect and seat all", "s", []float64{took.Seconds()}).
		note("session, WebSocket, hello, join → joined for each user; %d workers × ≤%d, 16 at a time each", nWorkers, capN))
	b.rep.add(newRow(scen, "connect-and-seat rate", "users/s", []float64{float64(n-failures) / took.Seconds()}))
	b.rep.add(newRow(scen, "chatd nodes used", "nodes", []float64{float64(len(nodes))}).
		note("the open-file limit is %d per process here: each node and each generator process holds at most %d; users per node %s", files, capN, joinInts(perNode)))
	b.rep.check(scen, "every user connected and seated", failures == 0, "%d of %d failed%s", failures, n, firstErrors(firstErrs))
	if failures > 0 && failures == n {
		return fmt.Errorf("conns: no user connected: %s", strings.Join(firstN(firstErrs, 3), " | "))
	}

	// phase idle
	live := n - failures
	b.prog.Say("conns: idle %s", b.opt.ConnsIdle)
	// the joins' background work settles, and every node has run a
	// presence tick (every 10 s) and a heartbeat since its last join
	if err := sleepCtx(ctx, connsSettle); err != nil {
		return err
	}
	r0, err := b.redisUsage(ctx)
	if err != nil {
		return fmt.Errorf("conns: redis: %w", err)
	}
	var nodePids []int
	for _, p := range nodes {
		nodePids = append(nodePids, p.Pid())
	}
	cpuNodes := startCPU(append(slices.Clone(nodePids), b.w.redisPid())...)
	cpuGen := startCPU(append([]int{0}, genPids...)...)
	t0 := time.Now()
	if err := sleepCtx(ctx, b.opt.ConnsIdle); err != nil {
		return err
	}
	idleSecs := time.Since(t0).Seconds()
	r1, err := b.redisUsage(ctx)
	if err != nil {
		return fmt.Errorf("conns: redis: %w", err)
	}
	nodeCores, genCores := cpuNodes.cores(), cpuGen.cores()
	after, err := b.sampleNodes(ctx, nodes, true)
	if err != nil {
		return err
	}
	var dRSS, dHeap, dG float64
	var perNodeRSS []string
	for i := range nodes {
		dRSS += after[i].rss - base0[i].rss
		dHeap += after[i].heap - base0[i].heap
		dG += after[i].goroutines - base0[i].goroutines
		perNodeRSS = append(perNodeRSS, fmt.Sprintf("%s %d conns %.0f MiB", nodes[i].Name, perNode[i], after[i].rss/(1<<20)))
	}
	chatdKiB := dRSS / float64(live) / 1024
	idleScen := scen + ", idle " + b.opt.ConnsIdle.String()
	cmdD, _ := cmdDelta(r0.calls, r1.calls)
	cmdsPerSec := float64(r1.processed-r0.processed) / idleSecs
	redisCores := (r1.cpuUs - r0.cpuUs) / 1e6 / idleSecs
	var nodesCPU float64
	for _, c := range nodeCores[:len(nodes)] {
		nodesCPU += c
	}
	var genCPU, genRSS float64
	for _, c := range genCores {
		genCPU += c
	}
	for _, pid := range genPids {
		if r, err := rssOf(pid); err == nil {
			genRSS += float64(r)
		}
	}
	b.rep.add(newRow(idleScen, "chatd RSS per connection", "KiB", []float64{chatdKiB}).goalValue(false, 16).
		note("VmRSS summed over the nodes, after the idle window minus before any connection, / %d connections; %s", live, strings.Join(perNodeRSS, ", ")))
	b.rep.add(newRow(idleScen, "chatd heap in use per connection", "KiB", []float64{dHeap / float64(live) / 1024}).note("go_memstats_heap_inuse_bytes from each node's /metrics, same deltas"))
	b.rep.add(newRow(idleScen, "chatd goroutines per connection", "goroutines", []float64{dG / float64(live)}).note("go_goroutines from /metrics, same deltas"))
	usersCmds, usersCores := max(0, cmdsPerSec-bgCmds), max(0, redisCores-bgCores)
	b.rep.add(newRow(idleScen, "Redis commands per second", "cmd/s", []float64{cmdsPerSec}).
		note("INFO stats total_commands_processed over the window (INFO itself included; Redis 7 counts the commands scripts run too); with nobody connected %.1f/s over %s (the nodes' own loops); top per second: %s", bgCmds, bgFor, topCmds(cmdD, max(1, int(math.Round(idleSecs))), 6)))
	b.rep.add(newRow(idleScen, "Redis commands per second per 100 users", "cmd/s", []float64{usersCmds * 100 / float64(live)}).goalValue(false, 1).
		note("the window's rate less the rate with nobody connected, per 100 users; with it: %.2f", cmdsPerSec*100/float64(live)))
	b.rep.add(newRow(idleScen, "Redis CPU per 100,000 users", "% core", []float64{usersCores * 100 * 100000 / float64(live)}).goalValue(false, 5).
		note("INFO cpu used_cpu_sys+used_cpu_user over the window, less the rate with nobody connected (%.2f%% of a core), scaled from %d users: %.2f%% of a core in all", bgCores*100, live, redisCores*100))
	b.rep.add(newRow(idleScen, "chatd CPU, all nodes", "% core", []float64{nodesCPU * 100}).note("/proc/<pid>/stat utime+stime over the window, summed over %d nodes", len(nodes)))
	b.rep.add(newRow(idleScen, "generator CPU", "% core", []float64{genCPU * 100}).note("chatbench and its %d workers, /proc/<pid>/stat", nWorkers))
	b.rep.add(newRow(idleScen, "generator RSS, workers", "MiB", []float64{genRSS / (1 << 20)}).note("VmRSS summed over the %d workers", nWorkers))

	// phase wave: one say per room, from the first member a worker reported
	type seat struct{ w, k int }
	senders := map[string]seat{}
	roomSize := map[string]int{}
	for wi, m := range connected {
		for k, r := range m.Rooms {
			if r == "" {
				continue
			}
			roomSize[r]++
			if _, ok := senders[r]; !ok {
				senders[r] = seat{wi, k}
			}
		}
	}
	byWorker := make([][]int, len(workers))
	for _, s := range senders {
		byWorker[s.w] = append(byWorker[s.w], s.k)
	}
	b.prog.Say("conns: wave, one message in each of %d rooms", len(senders))
	waveTag := b.tag("w")
	for wi, wp := range workers {
		if err := wp.plan(connsPlan{Cmd: "say", Senders: byWorker[wi], Tag: waveTag, WaitMS: 30000}); err != nil {
			return err
		}
	}
	var lat Lat
	var missing, dups, wrong, refused, dropped int
	var firstSend, lastRecv int64
	var waveErrs []string
	for _, wp := range workers {
		m, err := wp.await(ctx, "wave", 60*time.Second, nil)
		if err != nil {
			return fmt.Errorf("conns wave: %w", err)
		}
		lat.AddAll(m.Lat)
		missing, dups, wrong, refused, dropped = missing+m.Missing, dups+m.Dups, wrong+m.Wrong, refused+m.Failures, dropped+m.Dropped
		waveErrs = append(waveErrs, m.FirstErrors...)
		if m.FirstSend > 0 && (firstSend == 0 || m.FirstSend < firstSend) {
			firstSend = m.FirstSend
		}
		lastRecv = max(lastRecv, m.LastRecv)
	}
	sum := lat.Summary()
	waveScen := fmt.Sprintf("%s, wave: 1 message in each of %d rooms", scen, len(senders))
	b.rep.add(newRow(waveScen, "send → receive p50", "ms", []float64{sum.P50}).note("%d deliveries; send time carried in the text, receive time at each member", sum.N))
	b.rep.add(newRow(waveScen, "send → receive p99", "ms", []float64{sum.P99}))
	b.rep.add(newRow(waveScen, "send → receive max", "ms", []float64{sum.Max}))
	b.rep.add(newRow(waveScen, "wave time, first say → last delivery", "ms", []float64{float64(lastRecv-firstSend) / 1e6}))
	b.rep.check(waveScen, "every member got its room's one message exactly once", missing == 0 && dups == 0 && wrong == 0 && refused == 0 && sum.N == live,
		"%d deliveries of %d (sum of room sizes); %d missing, %d duplicates, %d of another room, %d says refused%s", sum.N, live, missing, dups, wrong, refused, firstErrors(waveErrs))
	b.rep.check(scen, "no connection dropped while idle", dropped == 0, "%d dropped", dropped)

	// close chatd's connections
	for _, wp := range workers {
		if err := wp.plan(connsPlan{Cmd: "close"}); err != nil {
			return err
		}
	}
	for _, wp := range workers {
		if _, err := wp.await(ctx, "closed", 60*time.Second, nil); err != nil {
			return err
		}
	}

	// the bare hub (A3), same measure with min(N, cap) connections
	hn := min(n, capN)
	hubIdle := min(b.opt.ConnsIdle, 15*time.Second)
	hubScen := fmt.Sprintf("conns, bare hub (A3), %d users, idle %s", hn, hubIdle)
	hb, err := b.sampleNodes(ctx, []*Proc{b.w.Hub0}, false)
	if err != nil {
		return err
	}
	b.prog.Say("conns: %d users → bare hub", hn)
	hubPer := ceilDiv(hn, nWorkers)
	hubWorkers := 0
	for i, wp := range workers {
		wp.first, wp.count = i*hubPer, min(hubPer, hn-i*hubPer)
		if wp.count > 0 {
			hubWorkers++
		}
	}
	hconn, htook, err := b.connsConnect(ctx, workers, connsPlan{Prefix: tag + "h", Bases: []string{b.w.Hub0.URL}, Lobby: tag + "h", LobbySize: connsLobbySize,
		Query: map[string]string{"cap": "50"}, Parallel: 16}, 1)
	if err != nil {
		return err
	}
	hfail := 0
	for _, m := range hconn {
		hfail += m.Failures
	}
	if err := sleepCtx(ctx, hubIdle); err != nil {
		return err
	}
	ha, err := b.sampleNodes(ctx, []*Proc{b.w.Hub0}, false)
	if err != nil {
		return err
	}
	hubKiB := (ha[0].rss - hb[0].rss) / float64(max(1, hn-hfail)) / 1024
	var hubErrs []string
	for _, m := range hconn {
		hubErrs = append(hubErrs, m.FirstErrors...)
	}
	b.rep.check(hubScen, "every user connected and seated", hfail == 0, "%d of %d failed%s", hfail, hn, firstErrors(hubErrs))
	b.rep.add(newRow(hubScen, "bare hub RSS per connection", "KiB", []float64{hubKiB}).
		note("VmRSS after minus before; %d workers, connected in %.1f s; the hub serves no /metrics: RSS only", hubWorkers, htook.Seconds()))
	b.rep.add(newRow(scen, "chatd RSS per connection vs the bare hub", "KiB", []float64{chatdKiB}).vs("bare hub (A3)", []float64{hubKiB}).goalRatio(false, 1).
		note("chatd holds a seat, leases and presence per connection; the hub a reader, a writer and a queue"))
	return nil
}

// connsConnect sends each worker with users its connect plan (p with the
// worker's users and source addresses of phase) and waits for every
// answer; it returns them (in worker order, zero for a worker without
// users) and the wall time.
func (b *Bench) connsConnect(ctx context.Context, workers []*connsWorkerProc, p connsPlan, phase int) ([]connsMsg, time.Duration, error) {
	t0 := time.Now()
	for i, wp := range workers {
		if wp.count <= 0 {
			continue
		}
		q := p
		q.Cmd, q.First, q.Count, q.Src = "connect", wp.first, wp.count, connsSource(i, phase, wp.count)
		if err := wp.plan(q); err != nil {
			return nil, 0, err
		}
	}
	// every worker's answers are read at once, so that the progress
	// summed is everyone's
	var (
		mu       sync.Mutex
		progress = make([]int, len(workers))
		lastSay  = time.Now()
		out      = make([]connsMsg, len(workers))
		errs     = make([]error, len(workers))
		wg       sync.WaitGroup
	)
	for i, wp := range workers {
		if wp.count <= 0 {
			continue
		}
		wg.Go(func() {
			m, err := wp.await(ctx, "connected", 30*time.Minute, func(done int) {
				mu.Lock()
				defer mu.Unlock()
				progress[i] = done
				if time.Since(lastSay) > 5*time.Second {
					lastSay = time.Now()
					total := 0
					for _, d := range progress {
						total += d
					}
					b.prog.Say("conns: %d connected and seated", total)
				}
			})
			out[i], errs[i] = m, err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, 0, fmt.Errorf("conns connect: %w", err)
	}
	return out, time.Since(t0), nil
}

// sampleNodes samples every process of ps (metrics: also its /metrics).
func (b *Bench) sampleNodes(ctx context.Context, ps []*Proc, metrics bool) ([]nodeSample, error) {
	out := make([]nodeSample, len(ps))
	for i, p := range ps {
		s, err := sampleNode(ctx, p, metrics)
		if err != nil {
			return nil, fmt.Errorf("conns: %w", err)
		}
		out[i] = s
	}
	return out, nil
}

// ceilDiv is a/b rounded up.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// joinInts formats xs as "a, b, c".
func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// firstN is at most the first k of xs.
func firstN(xs []string, k int) []string { return xs[:min(k, len(xs))] }

// firstErrors formats the first 3 of errs as "; first: a | b | c", or ""
// when there are none.
func firstErrors(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	return "; first: " + strings.Join(firstN(errs, 3), " | ")
}
