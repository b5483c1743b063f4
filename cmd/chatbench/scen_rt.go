package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// scenarioAnchors measures the machine's limits: A1 (redis-benchmark),
// A2 (raw pub/sub fan-out) and A5 (bare Fiber GET /healthz), with chatd's
// own /healthz beside A5. A3 and A4 run inside the fan-out scenario,
// interleaved with chatd.
func (b *Bench) scenarioAnchors(ctx context.Context) error {
	if err := b.anchorRedis(ctx); err != nil {
		b.rep.fail("A1", err)
	}
	reps := min(b.opt.Repeats, 3) // the scenarios repeat their own anchors
	var sat, p50, p99 []float64
	for _, ord := range order(reps, 2) {
		for _, v := range ord {
			if v == 0 {
				b.prog.Say("A2 pub/sub saturated")
				r, _, err := b.pubsubRun(ctx, 0, b.opt.Dur)
				if err != nil {
					return err
				}
				sat = append(sat, r)
			} else {
				b.prog.Say("A2 pub/sub at %d/s", a2Rate)
				_, l, err := b.pubsubRun(ctx, a2Rate, b.opt.Dur)
				if err != nil {
					return err
				}
				p50, p99 = append(p50, l.P50), append(p99, l.P99)
			}
		}
	}
	b.rep.add(newRow("A2 pub/sub", "deliveries, saturated (16 publishers, 3 subscriber conns × 4 channels)", "msg/s", sat))
	b.rep.add(newRow("A2 pub/sub", fmt.Sprintf("publish→receive p50 at %d/s", a2Rate), "ms", p50))
	b.rep.add(newRow("A2 pub/sub", fmt.Sprintf("publish→receive p99 at %d/s", a2Rate), "ms", p99))

	hubs := b.w.Hubs[:len(b.w.Targets)]
	var bare, chatd []float64
	for _, ord := range order(reps, 2) {
		for _, v := range ord {
			var r float64
			var err error
			if v == 0 {
				b.prog.Say("A5 bare Fiber GET /healthz")
				r, err = b.httpRateOver(ctx, procURLs(hubs), "/healthz")
				bare = append(bare, r)
			} else {
				b.prog.Say("chatd GET /healthz")
				r, err = b.httpRateOver(ctx, b.w.Targets, "/healthz")
				chatd = append(chatd, r)
			}
			if err != nil {
				return err
			}
		}
	}
	b.rep.add(newRow("A5 HTTP", fmt.Sprintf("bare Fiber GET /healthz, %d process(es), %d workers", len(hubs), httpWorkers), "req/s", bare))
	b.rep.add(newRow("A5 HTTP", "chatd GET /healthz (middleware cost)", "req/s", chatd).vs("A5", bare))
	return nil
}

// a2Rate is the fixed publish rate of A2's latency runs (per second).
const a2Rate = 200

// httpWorkers is how many keep-alive HTTP clients the rate runs use.
const httpWorkers = 32

// httpRateOver splits httpWorkers over bases and sums their rates.
func (b *Bench) httpRateOver(ctx context.Context, bases []string, path string) (float64, error) {
	type out struct {
		r   float64
		err error
	}
	ch := make(chan out, len(bases))
	for _, base := range bases {
		go func() {
			r, err := b.httpRate(ctx, base+path, max(1, httpWorkers/len(bases)), b.opt.Dur)
			ch <- out{r, err}
		}()
	}
	var total float64
	var first error
	for range bases {
		o := <-ch
		total += o.r
		if o.err != nil && first == nil {
			first = o.err
		}
	}
	return total, first
}

func procURLs(ps []*Proc) []string {
	var u []string
	for _, p := range ps {
		u = append(u, p.URL)
	}
	return u
}

// fanVariant is one target set of the fan-out scenario.
type fanVariant struct {
	name    string
	targets []string
	senders int     // senders per room; 0: the run's -senders
	write   string  // bare hubs: the write mode (?write=); "" for chatd
	ingress string  // bare hubs: how says are taken (?ingress=: sync, pipe); "" for chatd
	rateMul float64 // fixed rate: this variant's rate is the run's × rateMul (0: × 1)
	tune    func(*fanSpec)
	// quietRedis: before each run, wait (at most 60 s) until Redis runs
	// fewer than this many commands a second for a second on end, so the work the previous
	// run left (chatd's cleanup of its users) is not counted in this
	// one's Redis figures; 0: no wait
	quietRedis int64
}

// hubVariants are the bare hub's three write modes on the same hub
// processes (targets): naive (one write per frame, context only),
// coalesced (one write per wake-up, one frame per event) and batched (one
// write per wake-up, events newline-joined per frame). goal is the
// coalescing hub every fan-out goal is stated against: the one that frames
// as chatd does in this run — batched when the client opens ?batch=1
// (the default), coalesced under -ws-batch=false.
func hubVariants(prefix string, targets []string) (naive, coalesced, batched, goal fanVariant) {
	naive = fanVariant{name: prefix + " naive", targets: targets, write: "naive"}
	coalesced = fanVariant{name: prefix + " coalesced", targets: targets, write: "coalesce"}
	batched = fanVariant{name: prefix + " batched", targets: targets, write: "batch"}
	goal = coalesced
	if wsBatch {
		goal = batched
	}
	return naive, coalesced, batched, goal
}

// twice is v with twice the senders per room: the anchor check's variant.
func (v fanVariant) twice(senders int) fanVariant {
	v.name += ", 2× senders"
	v.senders = 2 * senders
	return v
}

// roomSizeFor is the room size of a fan-out with n members: up to 200
// members share one room (the largest single-room fan-out), more fill rooms
// of 50 (chatd's default room.capacity).
func roomSizeFor(n int) int {
	if n <= 200 {
		return n
	}
	return 50
}

// fanSetup lifts chatd's message rate limit for the fan-out and returns
// how to restore it and room.capacity.
func (b *Bench) fanSetup(ctx context.Context) (restore func(), err error) {
	t0 := b.w.Targets[0]
	if _, err := b.api.SetSetting(ctx, t0, "rate.messages_per_second", 10000); err != nil {
		return nil, fmt.Errorf("lift the message rate limit for the run: %w", err)
	}
	restore = func() {
		for _, k := range []string{"rate.messages_per_second", "room.capacity"} {
			if err := b.api.ResetSetting(context.WithoutCancel(ctx), t0, k); err != nil {
				b.rep.fail("fanout", fmt.Errorf("reset %s: %w", k, err))
			}
		}
	}
	if err := b.waitSetting(ctx, "rate.messages_per_second", 10000); err != nil {
		restore()
		return nil, err
	}
	return restore, nil
}

// setRoomSize sets chatd's room.capacity for a fan-out and waits until
// every node has it.
func (b *Bench) setRoomSize(ctx context.Context, size int) error {
	if _, err := b.api.SetSetting(ctx, b.w.Targets[0], "room.capacity", size); err != nil {
		return fmt.Errorf("set room.capacity %d: %w", size, err)
	}
	return b.waitSetting(ctx, "room.capacity", float64(size))
}

// scenarioFanout: for each client count, saturated delivered/s of the bare
// hubs (A3 without Redis; A4 on Redis in its three write modes: naive,
// coalesced, batched) and chatd, all interleaved in one run; the anchor
// check (the goal hub with twice the senders, and every run's CPU split);
// then latency at a fixed rate of half the goal hub's ceiling; zero loss,
// no duplicates and order checked in every run. Every goal on an anchor is
// against the coalescing hub that frames as chatd does (hubVariants); the
// naive hub is reported beside it as context.
func (b *Bench) scenarioFanout(ctx context.Context) error {
	restore, err := b.fanSetup(ctx)
	if err != nil {
		return err
	}
	defer restore()
	nt := len(b.w.Targets)
	naive1, co1, ba1, hub1 := hubVariants("A4 hub×1", procURLs(b.w.Hubs[:1]))
	hub1x2 := hub1.twice(b.opt.Senders)
	chatd1 := fanVariant{name: "chatd×1", targets: b.w.Targets[:1]}
	_, _, _, hubN := hubVariants(fmt.Sprintf("A4 hub×%d", nt), procURLs(b.w.Hubs[:nt]))
	chatdN := fanVariant{name: fmt.Sprintf("chatd×%d", nt), targets: b.w.Targets}
	other := co1 // the coalescing mode that is not the goal, for context
	if hub1.name == co1.name {
		other = ba1
	}
	for _, n := range b.opt.Clients {
		size := roomSizeFor(n)
		if err := b.setRoomSize(ctx, size); err != nil {
			return err
		}
		big := n > 500
		reps := b.opt.Repeats
		if big {
			reps = min(reps, 2) // set-up and drain dominate: fewer repeats
		}
		sat := []fanVariant{naive1, co1, ba1, chatd1}
		switch {
		case !big:
			sat = append([]fanVariant{{name: "A3 hub, no Redis, naive", targets: []string{b.w.Hub0.URL}, write: "naive"}}, sat...)
			sat = append(sat, hub1x2)
			if nt > 1 {
				sat = append(sat, chatdN, hubN)
			}
		case nt > 1:
			sat = append(sat, chatdN)
		}
		scen := fmt.Sprintf("fan-out %d members, %s", n, roomsName(n, size))
		vals, err := b.fanRuns(ctx, scen, sat, n, size, 0, reps)
		if err != nil {
			return err
		}
		get := func(v fanVariant, f func(fanResult) float64) []float64 {
			var xs []float64
			for _, r := range vals[v.name] {
				xs = append(xs, f(r))
			}
			return xs
		}
		dps := func(r fanResult) float64 { return r.DeliveredPerSec }
		if !big {
			b.rep.add(newRow(scen, "A3 bare hub, no Redis, naive writes: delivered, saturated", "msg/s", get(sat[0], dps)))
		}
		b.rep.add(newRow(scen, "A4 bare hub×1 on Redis, naive (one write per frame; context): delivered, saturated", "msg/s", get(naive1, dps)))
		b.rep.add(newRow(scen, "A4 bare hub×1 on Redis, coalesced (one write per wake-up, a frame per event): delivered, saturated", "msg/s", get(co1, dps)).
			vs(naive1.name, get(naive1, dps)))
		b.rep.add(newRow(scen, "A4 bare hub×1 on Redis, batched (one write per wake-up, events newline-joined): delivered, saturated", "msg/s", get(ba1, dps)).
			vs(naive1.name, get(naive1, dps)))
		if !big {
			b.hubCheck(scen, hub1.name, get(hub1, dps), get(hub1x2, dps))
		}
		b.rep.add(newRow(scen, "chatd×1: delivered, saturated", "msg/s", get(chatd1, dps)).vs(hub1.name, get(hub1, dps)).goalRatio(true, 0.8).
			note("goal anchor: the coalescing hub that frames as chatd does here"))
		b.rep.add(newRow(scen, "chatd×1 vs "+other.name+" (context): delivered, saturated", "msg/s", get(chatd1, dps)).vs(other.name, get(other, dps)))
		b.rep.add(newRow(scen, "chatd×1 vs "+naive1.name+" (context: the anchor of the earlier headline): delivered, saturated", "msg/s", get(chatd1, dps)).
			vs(naive1.name, get(naive1, dps)))
		if nt > 1 {
			b.rep.add(newRow(scen, chatdN.name+": delivered, saturated", "msg/s", get(chatdN, dps)).vs(chatd1.name, get(chatd1, dps)).goalRatio(true, 0.9))
		}
		if nt > 1 && !big {
			b.rep.add(newRow(scen, hubN.name+": delivered, saturated", "msg/s", get(hubN, dps)))
			b.rep.add(newRow(scen, chatdN.name+" vs "+hubN.name+": delivered, saturated", "msg/s", get(chatdN, dps)).vs(hubN.name, get(hubN, dps)).goalRatio(true, 0.8))
		}
		for _, v := range sat {
			b.cpuRow(scen, v.name+", saturated", vals[v.name])
		}

		// latency at fixed rates: -rates (deliveries per second), or half
		// the goal hub's ceiling (the naive hub is not run here: that rate
		// may be past its own ceiling)
		ceiling := median(get(hub1, dps))
		rates := []float64{ceiling / 2}
		named := len(b.opt.Rates) > 0
		if named {
			rates = b.opt.Rates
		}
		for _, deliveries := range rates {
			rate := deliveries / float64(size)
			at := fmt.Sprintf(" at %.0f says/s = %s deliveries/s (½ the %s ceiling)", rate, fmtNum(rate*float64(size)), hub1.name)
			if named {
				at = fmt.Sprintf(" at %.0f says/s = %s deliveries/s (%.2f × the %s ceiling)", rate, fmtNum(rate*float64(size)), deliveries/ceiling, hub1.name)
			}
			if err := b.fanFixed(ctx, scen, at, n, size, rate, reps, hub1, chatd1, chatdN, hubN, nt > 1 && !big); err != nil {
				return err
			}
		}
	}
	return nil
}

// fanFixed runs the fan-out's fixed-rate variants at rate says/s and adds
// their latency rows (at names the rate).
func (b *Bench) fanFixed(ctx context.Context, scen, at string, n, size int, rate float64, reps int, hub1, chatd1, chatdN, hubN fanVariant, multi bool) error {
	dps := func(r fanResult) float64 { return r.DeliveredPerSec }
	fixed := []fanVariant{hub1, chatd1}
	if multi {
		fixed = append(fixed, chatdN, hubN)
	}
	fv, err := b.fanRuns(ctx, scen, fixed, n, size, rate, reps)
	if err != nil {
		return err
	}
	lat := func(v fanVariant, f func(fanResult) float64) []float64 {
		var xs []float64
		for _, r := range fv[v.name] {
			xs = append(xs, f(r))
		}
		return xs
	}
	p50 := func(r fanResult) float64 { return r.Lat.P50 }
	p99 := func(r fanResult) float64 { return r.Lat.P99 }
	mx := func(r fanResult) float64 { return r.Lat.Max }
	ack99 := func(r fanResult) float64 { return r.AckLat.P99 }
	ping99 := func(r fanResult) float64 { return r.PingLat.P99 }
	for _, v := range fixed[1:] {
		if v.name == hubN.name {
			continue
		}
		anchor := hub1
		if v.name == chatdN.name {
			anchor = hubN
		}
		b.rep.add(newRow(scen, v.name+": send→receive p50"+at, "ms", lat(v, p50)).vs(anchor.name, lat(anchor, p50)))
		b.rep.add(newRow(scen, v.name+": send→receive p99"+at, "ms", lat(v, p99)).vs(anchor.name, lat(anchor, p99)).goalRatio(false, 1.5))
		b.rep.add(newRow(scen, v.name+": send→receive max"+at, "ms", lat(v, mx)).vs(anchor.name, lat(anchor, mx)))
	}
	for _, v := range []fanVariant{hub1, chatd1} {
		b.rep.add(newRow(scen, v.name+": say→ack p99"+at, "ms", lat(v, ack99)).vs("Redis PING p99, same run", lat(v, ping99)).
			note("one PING every 5 ms on its own connection while the run goes"))
	}
	b.rep.add(newRow(scen, "chatd×1: delivered"+at, "msg/s", lat(chatd1, dps)))
	for _, v := range fixed {
		b.cpuRow(scen, v.name+at, fv[v.name])
	}
	return nil
}

// scenarioAnchorCheck is the fan-out's anchor check alone, on the first
// -clients count: the goal hub (one bare hub on Redis, coalescing, framed
// as chatd frames in this run) against itself with twice the senders per
// room, interleaved, with the CPU each process used.
func (b *Bench) scenarioAnchorCheck(ctx context.Context) error {
	n := b.opt.Clients[0]
	size := roomSizeFor(n)
	_, _, _, hub1 := hubVariants("A4 hub×1", procURLs(b.w.Hubs[:1]))
	hub1x2 := hub1.twice(b.opt.Senders)
	scen := fmt.Sprintf("anchor check, %d members, %s", n, roomsName(n, size))
	vals, err := b.fanRuns(ctx, scen, []fanVariant{hub1, hub1x2}, n, size, 0, b.opt.Repeats)
	if err != nil {
		return err
	}
	dps := func(v fanVariant) []float64 {
		var xs []float64
		for _, r := range vals[v.name] {
			xs = append(xs, r.DeliveredPerSec)
		}
		return xs
	}
	b.rep.add(newRow(scen, hub1.name+" on Redis: delivered, saturated", "msg/s", dps(hub1)))
	b.hubCheck(scen, hub1.name, dps(hub1), dps(hub1x2))
	b.cpuRow(scen, hub1.name+", saturated", vals[hub1.name])
	b.cpuRow(scen, hub1x2.name+", saturated", vals[hub1x2.name])
	return nil
}

func roomsName(n, size int) string {
	r := roomsFor(n, size)
	if r == 1 {
		return "1 room"
	}
	return fmt.Sprintf("%d rooms of %d", r, size)
}

// hubCheck adds the anchor check: the hub with twice the senders per room
// (so twice the generator's sending connections and offered load) must
// not deliver more than the hub itself beyond the noise of the hub's own
// repeats (at least 5%): if it did, the generator and not the hub set the
// ceiling. name is the hub's variant: the coalescing hub the goals are
// stated against. Noise over maxCheckNoise proves nothing either way (a
// bound of 1 + spread passes a generator-bound hub on a loaded machine),
// so then the check fails as inconclusive.
func (b *Bench) hubCheck(scen, name string, hub, hub2x []float64) {
	row := b.rep.add(newRow(scen, "anchor check: "+name+" with 2× senders per room: delivered, saturated", "msg/s", hub2x).vs(name, hub))
	ok, why := anchorCheck(row.RatioMedian, spread(hub))
	row.Goal = fmt.Sprintf("ratio ≤ 1 + noise (%.2f), noise ≤ %.0f%%", 1+max(spread(hub), 0.05), 100*maxCheckNoise)
	row.OK = &ok
	b.rep.check(scen, name+" bounded by the hub, not the generator", ok,
		"2× senders: %s vs %s msg/s, ratio %.2f; the hub's own spread %.0f%%: %s",
		fmtNum(median(hub2x)), fmtNum(median(hub)), row.RatioMedian, 100*spread(hub), why)
}

// maxCheckNoise is the largest spread of the hub's own repeats under which
// the anchor check can prove anything (the report's ⚠ threshold).
const maxCheckNoise = 0.2

// anchorCheck judges the anchor check: ratio is 2× senders over the hub
// (medians), noise the hub's own spread.
func anchorCheck(ratio, noise float64) (bool, string) {
	switch {
	case math.IsNaN(ratio) || math.IsNaN(noise):
		return false, "no figures"
	case noise > maxCheckNoise:
		return false, fmt.Sprintf("inconclusive: the hub's repeats spread over %.0f%%, too noisy to tell", 100*maxCheckNoise)
	case ratio > 1+max(noise, 0.05):
		return false, "more senders delivered more: the generator, not the hub, set the ceiling"
	}
	return true, "more senders delivered no more: the hub set the ceiling"
}

// cpuRow reports the CPU that chatbench, the server processes and Redis
// used during runs (median over repeats), and chatbench's cost per
// delivery.
func (b *Bench) cpuRow(scen, what string, rs []fanResult) {
	var gen, srv, rds, perDel []float64
	for _, r := range rs {
		gen = append(gen, r.GenCPU)
		if r.ServerCPU >= 0 {
			srv = append(srv, r.ServerCPU)
		}
		if r.RedisCPU >= 0 {
			rds = append(rds, r.RedisCPU)
		}
		if r.DeliveredPerSec > 0 {
			perDel = append(perDel, r.GenCPU/r.DeliveredPerSec*1e6)
		}
	}
	row := b.rep.add(newRow(scen, what+": chatbench's own CPU", "cores", gen))
	row.note("server %s cores, Redis %s cores, chatbench %s µs CPU per delivery; %d cores in all",
		fmtNum(median(srv)), fmtNum(median(rds)), fmtNum(median(perDel)), runtime.NumCPU())
}

// fanRuns runs each variant reps times, interleaved, and checks every run
// for loss, duplicates, order and room sizes.
func (b *Bench) fanRuns(ctx context.Context, scen string, vs []fanVariant, n, size int, rate float64, reps int) (map[string][]fanResult, error) {
	out := map[string][]fanResult{}
	for ri, ord := range order(reps, len(vs)) {
		for _, vi := range ord {
			v := vs[vi]
			label := fmt.Sprintf("%s %s %s rep %d/%d", scen, v.name, rateName(rate), ri+1, reps)
			senders := b.opt.Senders
			if v.senders > 0 {
				senders = v.senders
			}
			var pids []int
			for _, t := range v.targets {
				if p := b.w.pidOf(t); p > 0 {
					pids = append(pids, p)
				}
			}
			if len(pids) != len(v.targets) {
				pids = nil // not all known: unknown
			}
			spec := fanSpec{label: label, targets: v.targets, write: v.write, ingress: v.ingress, clients: n, roomSize: size,
				senders: min(senders, size), rate: rate, window: b.opt.Window, dur: b.opt.Dur,
				pids: pids, redisPid: b.w.redisPid(), redis: b.w.RedisAddr}
			if v.rateMul > 0 {
				spec.rate *= v.rateMul
			}
			if v.tune != nil {
				v.tune(&spec)
			}
			if v.quietRedis > 0 {
				b.quiesceBelow(ctx, v.quietRedis, 60*time.Second)
			}
			r, err := b.fanout(ctx, spec)
			if err != nil {
				return out, err
			}
			out[v.name] = append(out[v.name], r)
			if !r.Lossless() {
				b.prog.Say("%s: LOSS: sent %d acked %d refused %d delivered %d of %d dups %d disorder %d dropped %d first error %q",
					label, r.Sent, r.Acked, r.Refused, r.Delivered, r.Expected, r.Duplicates, r.OutOfOrder, r.Dropped, r.FirstError)
			}
			b.settle(ctx, v.targets)
		}
	}
	for _, v := range vs {
		var sent, acked, refused, skipped, exp, del, dropped, dups, disorder int64
		rooms, maxm := 0, 0
		errText := ""
		for _, r := range out[v.name] {
			sent += r.Sent
			acked += r.Acked
			refused += r.Refused
			skipped += r.Skipped
			exp += r.Expected
			del += r.Delivered
			dropped += r.Dropped
			dups += r.Duplicates
			disorder += r.OutOfOrder
			rooms = max(rooms, r.Rooms)
			maxm = max(maxm, r.MaxMembers)
			if errText == "" {
				errText = r.FirstError
			}
		}
		ok := del == exp && acked == sent && dropped == 0 && refused == 0 && dups == 0 && disorder == 0
		vrate := rate
		if v.rateMul > 0 {
			vrate *= v.rateMul
		}
		detail := fmt.Sprintf("%s: sent %d, acked %d, refused %d, delivered %d of %d, duplicates %d, out of order %d, clients dropped %d",
			rateName(vrate), sent, acked, refused, del, exp, dups, disorder, dropped)
		if skipped > 0 {
			detail += fmt.Sprintf(", %d sends skipped (backlog ≥ 100)", skipped)
		}
		if errText != "" {
			detail += ", first error: " + errText
		}
		b.rep.check(scen, v.name+": zero loss, no duplicates, order kept", ok, "%s", detail)
		b.rep.check(scen, v.name+": rooms", rooms == roomsFor(n, size) && maxm <= size, "%d rooms for %d clients, fullest %d", rooms, n, maxm)
	}
	return out, nil
}

// settle waits, after a run closed its connections, until every chatd
// node's chatd_ws_connections gauge is 0 (bounded), so the next run starts
// quiet. Bare hubs have no /metrics: nothing to wait for.
func (b *Bench) settle(ctx context.Context, targets []string) {
	waitFor(ctx, 5*time.Second, func() bool {
		for _, t := range targets {
			if v, ok := b.metric(ctx, t, "chatd_ws_connections"); ok && v > 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(100 * time.Millisecond)
}

// metric reads one unlabelled sample from base's /metrics.
func (b *Bench) metric(ctx context.Context, base, name string) (float64, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := b.api.hc.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// waitSetting waits until every node's GET /settings shows key = value.
func (b *Bench) waitSetting(ctx context.Context, key string, value float64) error {
	tok, err := b.api.Session(ctx, b.w.Targets[0], "settings"+b.runID)
	if err != nil {
		return err
	}
	for _, t := range b.w.Targets {
		ok := waitFor(ctx, 5*time.Second, func() bool {
			var s struct {
				Values map[string]any `json:"values"`
			}
			if _, err := b.api.Do(ctx, "GET", t+"/api/v1/settings", tok, nil, &s); err != nil {
				return false
			}
			v, _ := s.Values[key].(float64)
			return v == value
		})
		if !ok {
			return fmt.Errorf("%s: %s not %v after 5s", t, key, value)
		}
	}
	time.Sleep(200 * time.Millisecond) // the node's watchers apply it
	return nil
}
