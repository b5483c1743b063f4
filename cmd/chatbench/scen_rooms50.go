package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
)

// The rooms50 scenario is chatd's real shape (issue #42): users in rooms
// of 50, every user a sender, says at a fixed total rate on an open-loop
// schedule, against a bare hub with chatd's ingress (hub_ingress.go: a say
// queue per connection, PUBLISHes pipelined, a subscription per room on
// every hub node, coalesced writes), chatd and hub runs interleaved
// (A B, B A, …) in the same run. Latency is taken from each say's
// scheduled send time, so a generator or server that falls behind shows
// as latency rather than as missing samples.
//
// What it reports, each against the hub of the same node count:
// server CPU per delivery (/proc of the server processes over the
// measured span, ÷ deliveries in it); Redis CPU per say (/proc of the
// private redis-server, and INFO cpu; ÷ says sent in the span; chatd's
// idle work for its connected users — leases, presence — is in its
// figure, as it is in production); Redis commands per say (INFO
// commandstats, script-inner commands counted); p50/p99/p99.9 from the
// schedule; loss, duplicates and reordering; and the generator's own CPU
// and how late it sent behind its schedule, with a check that it did not
// set the figures. -rooms50-2x adds the hub at twice the rate: a hub that
// delivers twice as much at a like p99 shows the generator had room.

// r50Goals are the goals, as ratios to the hub.
const (
	r50GoalP99      = 1.5  // p99 ≤ 1.5 × hub
	r50GoalServer   = 1.15 // server CPU per delivery ≤ 1.15 × hub
	r50GoalRedisSay = 2.0  // Redis CPU per say ≤ 2 × hub
)

// scenarioRooms50 runs the rooms-of-50 scenario for each -rooms50-nodes
// count.
func (b *Bench) scenarioRooms50(ctx context.Context) error {
	restore, err := b.fanSetup(ctx)
	if err != nil {
		return err
	}
	defer restore()
	if err := b.setRoomSize(ctx, 50); err != nil {
		return err
	}
	if b.w.RedisProc == nil {
		return fmt.Errorf("rooms50 reads the private redis-server's CPU: run it without -redis and -targets")
	}
	for _, nn := range b.opt.R50Nodes {
		if nn > len(b.w.Targets) || nn > len(b.w.Hubs) {
			return fmt.Errorf("-rooms50-nodes %d: the run has %d chatd nodes (-nodes)", nn, len(b.w.Targets))
		}
		if err := b.rooms50(ctx, nn); err != nil {
			return err
		}
	}
	return nil
}

// rooms50 is one rooms-of-50 comparison on nn nodes of each.
func (b *Bench) rooms50(ctx context.Context, nn int) error {
	users, rate := b.opt.R50Users, b.opt.R50Rate
	_, _, _, goal := hubVariants(fmt.Sprintf("hub×%d", nn), procURLs(b.w.Hubs[:nn]))
	tune := func(s *fanSpec) {
		s.senders = 50 // every member
		s.sample = 1   // every delivery timed: p99.9 needs them
		s.fromSchedule = true
		s.rinfo = b.redisUsage
	}
	const quiet = 100 // commands/s: chatd's idle nodes run fewer; the previous run's leaving users more
	hub := fanVariant{name: fmt.Sprintf("hub×%d (chatd's ingress)", nn), targets: goal.targets, write: goal.write, ingress: "pipe", senders: 50, tune: tune, quietRedis: quiet}
	chatd := fanVariant{name: fmt.Sprintf("chatd×%d", nn), targets: b.w.Targets[:nn], senders: 50, tune: tune, quietRedis: quiet}
	vs := []fanVariant{chatd, hub}
	hub2x := hub
	hub2x.name, hub2x.rateMul = hub.name+" at 2× the rate", 2
	if b.opt.R50Check {
		vs = append(vs, hub2x)
	}
	scen := fmt.Sprintf("rooms of 50: %d users, %.0f says/s, %d node(s)", users, rate, nn)
	vals, err := b.fanRuns(ctx, scen, vs, users, 50, rate, b.opt.Repeats)
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
	srvPerDel := func(r fanResult) float64 { return perUnit(r.ServerCPU*1e6, r.DeliveredPerSec) }
	redisPerSay := func(r fanResult) float64 { return perUnit(r.RedisCPU*1e6, r.SentPerSec) }
	infoPerSay := func(r fanResult) float64 {
		if r.RedisInfoCPUUs < 0 {
			return math.NaN()
		}
		return perUnit(r.RedisInfoCPUUs, float64(r.Sent))
	}
	callsPerSay := func(r fanResult) float64 {
		if r.RedisCalls < 0 {
			return math.NaN()
		}
		return perUnit(r.RedisCalls, float64(r.Sent))
	}
	// what a say costs Redis in system calls and event-loop wakeups: where
	// CPU per say goes when each call's work is small (perUnit: NaN when
	// unknown)
	readsPerSay := func(r fanResult) float64 { return perUnit(r.RedisReads, float64(r.Sent)) }
	writesPerSay := func(r fanResult) float64 { return perUnit(r.RedisWrites, float64(r.Sent)) }
	wakeupsPerSay := func(r fanResult) float64 { return perUnit(r.RedisWakeups, float64(r.Sent)) }
	p50 := func(r fanResult) float64 { return r.Lat.P50 }
	p99 := func(r fanResult) float64 { return r.Lat.P99 }
	p999 := func(r fanResult) float64 { return r.Lat.P999 }
	dps := func(r fanResult) float64 { return r.DeliveredPerSec }
	sps := func(r fanResult) float64 { return r.SentPerSec }
	from := "latency from the scheduled send time"

	b.rep.add(newRow(scen, chatd.name+": server CPU per delivery (/proc, all nodes)", "µs", get(chatd, srvPerDel)).
		vs(hub.name, get(hub, srvPerDel)).goalRatio(false, r50GoalServer))
	b.rep.add(newRow(scen, chatd.name+": Redis CPU per say (/proc of redis-server)", "µs", get(chatd, redisPerSay)).
		vs(hub.name, get(hub, redisPerSay)).goalRatio(false, r50GoalRedisSay).
		note("chatd's figure holds its idle work for the %d connected users (leases, presence) too", users))
	b.rep.add(newRow(scen, chatd.name+": Redis CPU per say (INFO cpu, context)", "µs", get(chatd, infoPerSay)).
		vs(hub.name, get(hub, infoPerSay)))
	b.rep.add(newRow(scen, chatd.name+": Redis commands per say (INFO commandstats)", "cmds", get(chatd, callsPerSay)).
		vs(hub.name, get(hub, callsPerSay)).note("chatd: %s; hub: %s", r50Cmds(vals[chatd.name]), r50Cmds(vals[hub.name])))
	b.rep.add(newRow(scen, chatd.name+": Redis read syscalls per say (/proc io)", "calls", get(chatd, readsPerSay)).
		vs(hub.name, get(hub, readsPerSay)))
	b.rep.add(newRow(scen, chatd.name+": Redis write syscalls per say (/proc io)", "calls", get(chatd, writesPerSay)).
		vs(hub.name, get(hub, writesPerSay)))
	b.rep.add(newRow(scen, chatd.name+": Redis event-loop wakeups per say (/proc status)", "wakeups", get(chatd, wakeupsPerSay)).
		vs(hub.name, get(hub, wakeupsPerSay)).note("voluntary context switches of redis-server's main thread: a sleep in epoll_wait each"))
	b.rep.add(newRow(scen, chatd.name+": send→receive p50", "ms", get(chatd, p50)).vs(hub.name, get(hub, p50)).note("%s", from))
	b.rep.add(newRow(scen, chatd.name+": send→receive p99", "ms", get(chatd, p99)).vs(hub.name, get(hub, p99)).goalRatio(false, r50GoalP99).note("%s", from))
	b.rep.add(newRow(scen, chatd.name+": send→receive p99.9", "ms", get(chatd, p999)).vs(hub.name, get(hub, p999)).note("%s", from))
	b.rep.add(newRow(scen, chatd.name+": delivered", "msg/s", get(chatd, dps)).vs(hub.name, get(hub, dps)).
		note("says sent per second: chatd %s, hub %s", fmtNum(median(get(chatd, sps))), fmtNum(median(get(hub, sps)))))
	for _, v := range vs {
		b.cpuRow(scen, v.name, vals[v.name])
	}
	// the generator: its CPU, its share of all CPU spent, and how late it
	// sent behind its own schedule
	for _, v := range vs {
		lag := get(v, func(r fanResult) float64 { return r.SendLag.P99 })
		share := get(v, func(r fanResult) float64 {
			all := r.GenCPU + max(r.ServerCPU, 0) + max(r.RedisCPU, 0)
			return perUnit(r.GenCPU, all)
		})
		b.rep.add(newRow(scen, v.name+": generator send lag behind its schedule, p99", "ms", lag).
			note("generator %s cores, %.0f%% of the CPU the run used (generator + servers + Redis); %d cores in all",
				fmtNum(median(get(v, func(r fanResult) float64 { return r.GenCPU }))), 100*median(share), runtime.NumCPU()))
	}
	hubP99, hubLag := median(get(hub, p99)), median(get(hub, func(r fanResult) float64 { return r.SendLag.P99 }))
	chatdLag := median(get(chatd, func(r fanResult) float64 { return r.SendLag.P99 }))
	ok := hubLag <= max(1, hubP99/4) && chatdLag <= max(1, hubP99/4)
	b.rep.check(scen, "the generator kept its schedule (send lag p99 ≤ ¼ of the hub's p99, or ≤ 1 ms)", ok,
		"send lag p99: %s ms in the hub's runs, %s ms in chatd's; the hub's p99 %s ms", fmtNum(hubLag), fmtNum(chatdLag), fmtNum(hubP99))
	if b.opt.R50Check {
		b.rep.add(newRow(scen, hub2x.name+": delivered", "msg/s", get(hub2x, dps)).vs(hub.name, get(hub, dps)).
			note("≈ 2 when neither the generator nor the hub is saturated at the run's rate"))
		b.rep.add(newRow(scen, hub2x.name+": send→receive p99", "ms", get(hub2x, p99)).vs(hub.name, get(hub, p99)).note("%s", from))
	}
	return nil
}

// perUnit is a / b, NaN when either is unknown (negative) or b is 0.
func perUnit(a, b float64) float64 {
	if a < 0 || b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// r50Cmds names the commands Redis ran most in rs (summed over repeats),
// with their calls per say.
func r50Cmds(rs []fanResult) string {
	total := map[string]int64{}
	var says int64
	for _, r := range rs {
		for k, v := range r.RedisByCmd {
			total[k] += v
		}
		says += r.Sent
	}
	if says == 0 {
		return "–"
	}
	keys := make([]string, 0, len(total))
	for k := range total {
		if k != "info" {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return int(total[b] - total[a]) })
	var parts []string
	for _, k := range keys[:min(len(keys), 5)] {
		parts = append(parts, fmt.Sprintf("%s %s", k, fmtNum(float64(total[k])/float64(says))))
	}
	return strings.Join(parts, ", ")
}
