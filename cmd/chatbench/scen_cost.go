package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/protocol"
)

// The cost scenario measures what each operation costs Redis — CPU
// (INFO cpu) and commands (INFO commandstats, INFO stats) — next to its
// floor: the fewest Redis commands that could do the same work, sent with
// go-redis straight to the run's Redis, same batch and payload sizes, in
// batches interleaved with chatd's (A B, B A, …). Every batch starts on a
// quiet Redis (quiesce) and has Redis's background rate, measured just
// before, subtracted.

// seatTick is chatd's seat renewal period at its default seat lease (30 s,
// renewed every lease/3): the naive floor renews once per user per tick.
const seatTick = 10 * time.Second

// idleCycle is the shortest span that holds whole periods of every idle
// loop of chatd (seats and presence every 10 s, connection leases every
// 20 s): the renewal is measured in slices of it.
const idleCycle = 20 * time.Second

// costSenders is how many WebSockets say in the say batches (2 per room,
// rooms of costMembers members), and how many goroutines run its floor.
const (
	costSenders = 8
	costMembers = 5
)

// redisUsage is one reading of the Redis counters the cost scenario
// compares, taken with a single INFO command.
type redisUsage struct {
	cpuUs     float64          // used_cpu_user + used_cpu_sys, µs
	processed int64            // total_commands_processed (Redis 7.0 counts script-inner commands there too)
	calls     map[string]int64 // INFO commandstats calls per command, script-inner commands included
	at        time.Time
}

// redisUsage reads INFO cpu, stats and commandstats in one command.
func (b *Bench) redisUsage(ctx context.Context) (redisUsage, error) {
	s, err := b.w.Redis.Info(ctx, "cpu", "stats", "commandstats").Result()
	if err != nil {
		return redisUsage{}, fmt.Errorf("INFO cpu stats commandstats: %w", err)
	}
	return parseUsage(s, time.Now())
}

// parseUsage reads a redisUsage from the text of INFO cpu, stats and
// commandstats.
func parseUsage(s string, at time.Time) (redisUsage, error) {
	u := redisUsage{calls: map[string]int64{}, at: at}
	var haveCPU, haveStats int
	for _, l := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok {
			continue
		}
		switch {
		case k == "used_cpu_user" || k == "used_cpu_sys":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return u, fmt.Errorf("INFO %s %q: %w", k, v, err)
			}
			u.cpuUs += f * 1e6
			haveCPU++
		case k == "total_commands_processed":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return u, fmt.Errorf("INFO %s %q: %w", k, v, err)
			}
			u.processed = n
			haveStats++
		default:
			addCmdstat(u.calls, k, v)
		}
	}
	if haveCPU != 2 || haveStats != 1 {
		return u, errors.New("INFO: no used_cpu_user, used_cpu_sys or total_commands_processed")
	}
	return u, nil
}

// costRate is Redis's background rate, per second: what it does with
// nothing measured running (its own cron, chatd's idle loops, INFO).
type costRate struct {
	cpuUs, calls, processed float64
}

// usageDelta is what Redis did between two readings, less the background
// over the same time.
type usageDelta struct {
	cpuUs     float64          // µs of Redis CPU
	calls     float64          // commandstats calls, INFO left out
	processed float64          // total_commands_processed, the reading's own INFO left out
	byCmd     map[string]int64 // raw commandstats calls per command (no background subtracted)
	el        time.Duration
}

// delta is u1 − u0 less bg over the time between them. The INFO of the
// first reading is counted by the second's total_commands_processed, so
// one command is taken off.
func (u0 redisUsage) delta(u1 redisUsage, bg costRate) usageDelta {
	d, total := cmdDelta(u0.calls, u1.calls)
	el := u1.at.Sub(u0.at)
	s := el.Seconds()
	return usageDelta{
		cpuUs:     u1.cpuUs - u0.cpuUs - bg.cpuUs*s,
		calls:     float64(total) - bg.calls*s,
		processed: float64(u1.processed-u0.processed-1) - bg.processed*s,
		byCmd:     d,
		el:        el,
	}
}

// costBackground measures Redis's background rate over dur, after quiesce.
func (b *Bench) costBackground(ctx context.Context, dur time.Duration) (costRate, error) {
	b.quiesce(ctx)
	u0, err := b.redisUsage(ctx)
	if err != nil {
		return costRate{}, err
	}
	select {
	case <-time.After(dur):
	case <-ctx.Done():
		return costRate{}, ctx.Err()
	}
	u1, err := b.redisUsage(ctx)
	if err != nil {
		return costRate{}, err
	}
	d := u0.delta(u1, costRate{})
	s := d.el.Seconds()
	return costRate{cpuUs: d.cpuUs / s, calls: d.calls / s, processed: d.processed / s}, nil
}

// costMeasure runs run between two readings on a quiesced Redis and
// returns what it cost, bg subtracted.
func (b *Bench) costMeasure(ctx context.Context, bg costRate, run func() error) (usageDelta, error) {
	b.quiesce(ctx)
	u0, err := b.redisUsage(ctx)
	if err != nil {
		return usageDelta{}, err
	}
	if err := run(); err != nil {
		return usageDelta{}, err
	}
	u1, err := b.redisUsage(ctx)
	if err != nil {
		return usageDelta{}, err
	}
	return u0.delta(u1, bg), nil
}

// perOp is one side of a cost comparison: per batch, Redis CPU, commands
// (commandstats) and total_commands_processed per operation, and the
// commands of the last batch.
type perOp struct {
	cpu, calls, processed []float64
	last                  usageDelta
}

// add records one batch of n operations.
func (p *perOp) add(d usageDelta, n float64) {
	p.cpu = append(p.cpu, d.cpuUs/n)
	p.calls = append(p.calls, d.calls/n)
	p.processed = append(p.processed, d.processed/n)
	p.last = d
}

// costPair measures n operations of chatd and of its floor, reps times
// each, interleaved (A B, B A, …); cleanup, when not nil, runs after each
// chatd batch, outside the measurement.
func (b *Bench) costPair(ctx context.Context, what string, n int, bg costRate, chatd, floor func(batch int) error, cleanup func(batch int) error) (c, f perOp, err error) {
	reps := b.opt.Repeats
	for ri, ord := range order(reps, 2) {
		for _, v := range ord {
			if v == 1 {
				b.prog.Say("cost: %s, floor batch %d/%d (%d ops)", what, ri+1, reps, n)
				d, err := b.costMeasure(ctx, bg, func() error { return floor(ri) })
				if err != nil {
					return c, f, fmt.Errorf("%s floor: %w", what, err)
				}
				f.add(d, float64(n))
				continue
			}
			b.prog.Say("cost: %s, chatd batch %d/%d (%d ops)", what, ri+1, reps, n)
			d, err := b.costMeasure(ctx, bg, func() error { return chatd(ri) })
			if err != nil {
				return c, f, fmt.Errorf("%s: %w", what, err)
			}
			c.add(d, float64(n))
			if cleanup != nil {
				if err := cleanup(ri); err != nil {
					return c, f, fmt.Errorf("%s clean-up: %w", what, err)
				}
			}
		}
	}
	return c, f, nil
}

// costRows reports a comparison: Redis CPU, commands (commandstats) and
// total_commands_processed per operation, each against its floor; it
// returns the CPU row for a goal.
func (b *Bench) costRows(scen, op, floorName string, c, f perOp, n int, note string) *Row {
	cpu := b.rep.add(newRow(scen, "Redis CPU per "+op, "µs", c.cpu).vs(floorName, f.cpu).
		note("%d %ss per batch; INFO cpu used_cpu_user+used_cpu_sys, background subtracted; floor: %s", n, op, note))
	b.rep.add(newRow(scen, "Redis commands per "+op+" (INFO commandstats: commands inside scripts counted too)", "cmds", c.calls).vs(floorName, f.calls).
		note("chatd's last batch: %s; floor: %s", topCmds(c.last.byCmd, n, 12), topCmds(f.last.byCmd, n, 4)))
	b.rep.add(newRow(scen, "Redis total_commands_processed per "+op+" (INFO stats)", "cmds", c.processed).vs(floorName, f.processed).
		note("%s", processedNote(c)))
	return cpu
}

// processedNote says whether total_commands_processed counted the
// commands scripts ran (Redis 7.0 does: it then equals commandstats's sum)
// or only the commands clients sent.
func processedNote(c perOp) string {
	calls, proc := median(c.calls), median(c.processed)
	if math.Abs(calls-proc) <= 0.02*max(calls, 1) {
		return "equal to the commandstats sum: this Redis counts the commands inside scripts in total_commands_processed too, so neither figure is the client's commands alone"
	}
	return fmt.Sprintf("%.2f fewer than commandstats: the commands run inside scripts are not counted here", calls-proc)
}

// perUserMinute scales calls per command over el to calls per minute;
// topCmds, given the number of users, then prints them per user.
func perUserMinute(d map[string]int64, el time.Duration) map[string]int64 {
	out := make(map[string]int64, len(d))
	for k, v := range d {
		out[k] = int64(math.Round(float64(v) * float64(time.Minute) / float64(el)))
	}
	return out
}

// scenarioCost: Redis CPU and commands per say, join, clean poll and per
// idle connected user, each next to its floor measured in the same run.
func (b *Bench) scenarioCost(ctx context.Context) error {
	if err := b.costRenewal(ctx); err != nil {
		return fmt.Errorf("renewal: %w", err)
	}
	n := b.opt.CostOps
	bg, err := b.costBackground(ctx, time.Duration(b.opt.scale(3000, 1000))*time.Millisecond)
	if err != nil {
		return err
	}
	if err := b.costSay(ctx, n, bg); err != nil {
		return fmt.Errorf("say: %w", err)
	}
	if err := b.costJoin(ctx, n, bg); err != nil {
		return fmt.Errorf("join: %w", err)
	}
	if err := b.costPoll(ctx, n, bg); err != nil {
		return fmt.Errorf("poll: %w", err)
	}
	return nil
}

// costConn is a cost scenario WebSocket whose reader discards everything
// but, for a sender, the answer to its say (ack or error).
type costConn struct {
	ws      *WS
	room    string
	answers chan error // a sender's: nil for an ack, an error for an error
	done    chan struct{}
	lost    atomic.Bool // the connection ended before Close
	closing atomic.Bool
}

// read reads events until the connection ends.
func (c *costConn) read() {
	defer close(c.done)
	for {
		ev, err := c.ws.NextEvent()
		if err != nil {
			if !c.closing.Load() {
				c.lost.Store(true)
			}
			return
		}
		if c.answers == nil {
			continue
		}
		switch string(eventType(ev)) {
		case "ack":
			c.answers <- nil
		case "error":
			if strField(ev, "ref") != nil {
				var f Frame
				if err := decodeFrame(ev, &f); err != nil {
					c.answers <- err
				} else {
					c.answers <- fmt.Errorf("say answered %s: %s", f.Code, f.ErrText)
				}
			}
		}
	}
}

// close closes the connection and waits for its reader.
func (c *costConn) close() {
	c.closing.Store(true)
	c.ws.Close()
	<-c.done
}

// costConnect opens n WebSockets of fresh users, round robin over the
// nodes, and joins each to its lobby (lobby(i)); senders(i) says whether
// connection i keeps its say answers.
func (b *Bench) costConnect(ctx context.Context, n int, lobby func(i int) string, sender func(i int) bool) ([]*costConn, error) {
	tag := b.tag("k")
	nt := len(b.w.Targets)
	cs := make([]*costConn, n)
	err := parallel(ctx, n, 32, func(i int) error {
		base := b.w.Targets[i%nt]
		tok, err := b.api.Session(ctx, base, tag+"x"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		ws, _, err := dialWS(ctx, base, tok)
		if err != nil {
			return err
		}
		room, err := ws.Join(lobby(i))
		if err != nil {
			ws.Close()
			return err
		}
		c := &costConn{ws: ws, room: room.ID, done: make(chan struct{})}
		if sender(i) {
			c.answers = make(chan error, 1)
		}
		cs[i] = c
		go c.read()
		return nil
	})
	if err != nil {
		costClose(cs)
		return nil, err
	}
	return cs, nil
}

// costClose closes every connection of cs.
func costClose(cs []*costConn) {
	for _, c := range cs {
		if c != nil {
			c.close()
		}
	}
}

// costSay: WebSocket says with a ref, each waiting for its ack (one say in
// flight per sender: one Redis round trip per say), against XADD + PUBLISH
// of the same fields and payload sizes pipelined per say.
func (b *Bench) costSay(ctx context.Context, n int, bg costRate) error {
	t0 := b.w.Targets[0]
	if _, err := b.api.SetSetting(ctx, t0, "rate.messages_per_second", 10000); err != nil {
		return fmt.Errorf("lift the message rate limit: %w", err)
	}
	defer func() {
		if err := b.api.ResetSetting(context.WithoutCancel(ctx), t0, "rate.messages_per_second"); err != nil {
			b.rep.fail("cost", fmt.Errorf("reset rate.messages_per_second: %w", err))
		}
	}()
	if err := b.waitSetting(ctx, "rate.messages_per_second", 10000); err != nil {
		return err
	}
	tag := b.tag("s")
	rooms := costSenders / 2
	// members i, i+rooms, … share lobby i%rooms; the first two of each say
	cs, err := b.costConnect(ctx, rooms*costMembers,
		func(i int) string { return "cs-" + tag + "-" + strconv.Itoa(i%rooms) },
		func(i int) bool { return i < costSenders })
	if err != nil {
		return err
	}
	defer costClose(cs)
	senders := cs[:costSenders]
	text := "cost " + strings.Repeat("x", 95) // 100 bytes, as the fan-out's
	var seq atomic.Int64
	chatd := func(int) error {
		return parallel(ctx, costSenders, costSenders, func(s int) error {
			c := senders[s]
			for k := s; k < n; k += costSenders {
				ref := "c" + strconv.FormatInt(seq.Add(1), 36)
				frame := fmt.Appendf(nil, `{"type":"say","room":%q,"text":%q,"ref":%q}`, c.room, text, ref)
				if err := c.ws.SendText(frame); err != nil {
					return fmt.Errorf("say: %w", err)
				}
				select {
				case err := <-c.answers:
					if err != nil {
						return err
					}
				case <-c.done:
					return errors.New("say: the connection closed before the ack")
				case <-time.After(10 * time.Second):
					return fmt.Errorf("say %s: no ack in 10 s", ref)
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}

	// the floor: the same stream fields and the same event, in keys and a
	// channel of the same shape; one subscriber on each channel, as a
	// chatd node subscribes to its rooms' channels
	type floorRoom struct{ key, ch, user, room string }
	frs := make([]floorRoom, costSenders)
	var chans []string
	for s := range frs {
		lobby := "cf-" + tag + "-" + strconv.Itoa(s%rooms)
		frs[s] = floorRoom{key: "cost:{" + lobby + "}:history:1", ch: "cost:{" + lobby + "}:events:1",
			user: tag + "y" + strconv.Itoa(s), room: lobby + "-1"}
		chans = append(chans, frs[s].ch)
	}
	sub := b.w.Redis.Subscribe(ctx, chans...)
	if _, err := sub.Receive(ctx); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer sub.Close()
	go func() {
		for range sub.Channel() {
		}
	}()
	floor := func(int) error {
		return parallel(ctx, costSenders, costSenders, func(s int) error {
			fr := frs[s]
			for k := s; k < n; k += costSenders {
				now := time.Now()
				id := fmt.Sprintf("%013d-%06d", now.UnixMilli(), k%1000)
				payload, err := protocol.Encode(protocol.MessageEvent{Message: Message{ID: id, Room: fr.room, From: fr.user, Text: text, TS: now}})
				if err != nil {
					return err
				}
				p := b.w.Redis.Pipeline()
				p.XAdd(ctx, &redis.XAddArgs{Stream: fr.key, MaxLen: 1000, Approx: true,
					Values: []any{"from", fr.user, "text", text, "ts", strconv.FormatInt(now.UnixMilli(), 10)}})
				p.Publish(ctx, fr.ch, payload)
				if _, err := p.Exec(ctx); err != nil {
					return fmt.Errorf("floor XADD+PUBLISH: %w", err)
				}
			}
			return nil
		})
	}
	c, f, err := b.costPair(ctx, "say", n, bg, chatd, floor, nil)
	if err != nil {
		return err
	}
	lost := 0
	for _, c := range cs {
		if c.lost.Load() {
			lost++
		}
	}
	scen := fmt.Sprintf("cost: say, %d senders in %d rooms of %d", costSenders, rooms, costMembers)
	b.costRows(scen, "say", "floor XADD+PUBLISH", c, f, n,
		fmt.Sprintf("XADD MAXLEN ~ 1000 (from, text, ts; %d-byte text) + PUBLISH of the same-size event to a channel with 1 subscriber, one pipeline per say from %d goroutines; chatd: WebSocket say with a ref, its ack awaited (one in flight per sender)", len(text), costSenders)).
		goalRatio(false, 2)
	inner := map[string]int64{}
	for k, v := range c.last.byCmd {
		if k != "evalsha" && k != "eval" {
			inner[k] = v
		}
	}
	b.rep.check(scen, "every say acked, no connection dropped", lost == 0, "%d of %d connections dropped", lost, len(cs))
	b.rep.check(scen, "what chatd ran per say: EVALSHA and, counted by commandstats as well, the commands inside the scripts",
		c.last.byCmd["evalsha"] > 0, "EVALSHA %.2f/say (message_send.lua, once per lobby per send commit: the says of a node's senders that meet in flight share one; and counter_add.lua, the global message counter, once per commit); inside them and beside: %s",
		float64(c.last.byCmd["evalsha"])/float64(n), topCmds(inner, n, 16))
	return nil
}

// costJoin: REST joins of distinct users into a fresh lobby per batch
// (rooms of 50), against the minimal seat claim: ZADD of the member into
// the room's ZSET and INCR of its count, one pipeline per join.
func (b *Bench) costJoin(ctx context.Context, n int, bg costRate) error {
	toks, err := b.sessions(ctx, b.tag("cj"), n)
	if err != nil {
		return err
	}
	nt := len(b.w.Targets)
	tag := b.tag("j")
	seated := make([]string, n)
	chatd := func(batch int) error {
		lobby := "cj-" + tag + "-" + strconv.Itoa(batch)
		return parallel(ctx, n, joinWorkers, func(i int) error {
			var out struct {
				Room Room `json:"room"`
			}
			if _, err := b.api.Do(ctx, http.MethodPost, b.w.Targets[i%nt]+"/api/v1/lobbies/"+lobby+"/join", toks[i], nil, &out); err != nil {
				return fmt.Errorf("join %s: %w", lobby, err)
			}
			seated[i] = out.Room.ID
			return nil
		})
	}
	// each batch's seats are given back at once, outside the measurement,
	// so their lapse does not load a later batch
	leave := func(int) error {
		return parallel(ctx, n, joinWorkers, func(i int) error {
			_, err := b.api.Do(ctx, http.MethodPost, b.w.Targets[i%nt]+"/api/v1/rooms/"+seated[i]+"/leave", toks[i], nil, nil)
			return err
		})
	}
	floor := func(batch int) error {
		pre := "cost:{cf-" + tag + "-" + strconv.Itoa(batch) + "}:"
		return parallel(ctx, n, joinWorkers, func(i int) error {
			room := i/50 + 1
			p := b.w.Redis.Pipeline()
			p.ZAdd(ctx, pre+"room:"+strconv.Itoa(room)+":members", redis.Z{Score: float64(room), Member: tag + "x" + strconv.Itoa(i)})
			p.Incr(ctx, pre+"room:"+strconv.Itoa(room)+":count")
			_, err := p.Exec(ctx)
			return err
		})
	}
	c, f, err := b.costPair(ctx, "join", n, bg, chatd, floor, leave)
	if err != nil {
		return err
	}
	scen := fmt.Sprintf("cost: join, %d users into rooms of 50", n)
	b.costRows(scen, "join", "floor ZADD+INCR", c, f, n,
		fmt.Sprintf("the minimal seat claim, ZADD of the member into its room's ZSET + INCR of the room's count, one pipeline per join from %d goroutines (no lobby lock, no capacity check, no lease, no presence); chatd: REST POST /lobbies/{l}/join, a fresh lobby per batch, the seats left after each batch outside the measurement", joinWorkers))
	return nil
}

// costPoll: clean REST polls (nothing dirty) of seated sessions, against
// one GET of a small key per poll.
func (b *Bench) costPoll(ctx context.Context, n int, bg costRate) error {
	tag := b.tag("p")
	lobby := "cp-" + tag
	b.prog.Say("cost: %d REST sessions join %s", n, lobby)
	ss, err := b.seatPollSessions(ctx, tag, lobby, n)
	if err != nil {
		return fmt.Errorf("set-up: %w", err)
	}
	var notClean atomic.Int64
	pass := func() error {
		return parallel(ctx, n, httpWorkers, func(i int) error {
			a, err := b.pollOnce(ctx, ss[i], "")
			if len(a.Dirty) > 0 {
				notClean.Add(1)
			}
			return err
		})
	}
	// one more pass clears what later joins made dirty
	if err := pass(); err != nil {
		return err
	}
	notClean.Store(0)
	key := "cost:{" + lobby + "}:mask"
	if err := b.w.Redis.Set(ctx, key, "0", time.Hour).Err(); err != nil {
		return fmt.Errorf("floor key: %w", err)
	}
	floor := func(int) error {
		return parallel(ctx, n, httpWorkers, func(int) error { return b.w.Redis.Get(ctx, key).Err() })
	}
	c, f, err := b.costPair(ctx, "clean poll", n, bg, func(int) error { return pass() }, floor, nil)
	if err != nil {
		return err
	}
	scen := fmt.Sprintf("cost: clean poll, %d seated REST sessions", n)
	b.costRows(scen, "clean poll", "floor GET", c, f, n,
		fmt.Sprintf("one GET of a small key per poll, from %d goroutines; chatd: GET /poll with nothing dirty from %d clients, %d of %d polls were not clean", httpWorkers, httpWorkers, notClean.Load(), n*len(c.cpu)))
	return nil
}

// costRenewal: N WebSocket users seated in rooms of 50 and idle for the
// window (several renewal ticks), measured in slices of one idle cycle:
// Redis CPU and commands per user per minute, against a ZADD per user per
// seat tick, with Redis's background (nobody connected) subtracted.
func (b *Bench) costRenewal(ctx context.Context) error {
	users := b.opt.CostUsers
	slice := min(idleCycle, b.opt.CostIdle)
	slices := max(1, int(b.opt.CostIdle/slice))
	bgDur := min(slice/2, 10*time.Second)
	b.prog.Say("cost: renewal: Redis background with nobody connected (%s)", bgDur)
	bg, err := b.costBackground(ctx, bgDur)
	if err != nil {
		return err
	}
	// the floor: ZADD of each user's lease expiry into its room's ZSET,
	// one pipeline per tick, enough ticks for a stable CPU reading
	tag := b.tag("r")
	ticks := max(1, (50000+users-1)/users)
	floorBatch := func() (usageDelta, error) {
		return b.costMeasure(ctx, bg, func() error {
			for t := range ticks {
				p := b.w.Redis.Pipeline()
				exp := float64(time.Now().Add(30*time.Second).UnixMilli() + int64(t))
				for i := range users {
					p.ZAdd(ctx, "cost:{cr-"+tag+"}:room:"+strconv.Itoa(i/50+1)+":leases", redis.Z{Score: exp, Member: tag + "x" + strconv.Itoa(i)})
				}
				if _, err := p.Exec(ctx); err != nil {
					return fmt.Errorf("floor ZADD: %w", err)
				}
			}
			return nil
		})
	}
	perMin := float64(time.Minute / seatTick)
	var fCPU, fCalls []float64
	floorRun := func(k int) error {
		for range k {
			b.prog.Say("cost: renewal floor, %d ZADDs × %d ticks", users, ticks)
			d, err := floorBatch()
			if err != nil {
				return err
			}
			per := float64(users * ticks)
			fCPU, fCalls = append(fCPU, d.cpuUs/per*perMin), append(fCalls, d.calls/per*perMin)
		}
		return nil
	}
	if err := floorRun((slices + 1) / 2); err != nil {
		return err
	}

	lobby := "cr-" + tag
	b.prog.Say("cost: renewal: %d WebSocket users join %s", users, lobby)
	cs, err := b.costConnect(ctx, users, func(int) string { return lobby }, func(int) bool { return false })
	if err != nil {
		return err
	}
	var cpu, calls, processed, cmdsPer100, pctAt100k []float64
	var last usageDelta
	b.quiesce(ctx)
	for s := range slices {
		b.prog.Say("cost: renewal: %d users idle, slice %d/%d of %s", users, s+1, slices, slice)
		u0, err := b.redisUsage(ctx)
		if err != nil {
			costClose(cs)
			return err
		}
		select {
		case <-time.After(slice):
		case <-ctx.Done():
			costClose(cs)
			return ctx.Err()
		}
		u1, err := b.redisUsage(ctx)
		if err != nil {
			costClose(cs)
			return err
		}
		d := u0.delta(u1, bg)
		last = d
		userSec := float64(users) * d.el.Seconds()
		cpu = append(cpu, d.cpuUs/userSec*60)
		calls = append(calls, d.calls/userSec*60)
		processed = append(processed, d.processed/userSec*60)
		cmdsPer100 = append(cmdsPer100, d.calls/userSec*100)
		pctAt100k = append(pctAt100k, d.cpuUs/userSec*100000/1e6*100)
	}
	lost := 0
	for _, c := range cs {
		if c.lost.Load() {
			lost++
		}
	}
	costClose(cs)
	if err := floorRun(slices / 2); err != nil {
		return err
	}
	scen := fmt.Sprintf("cost: renewal, %d idle WebSocket users in rooms of 50", users)
	where := fmt.Sprintf("%d slice(s) of %s idle (seats and presence every 10 s, connection leases every 20 s), background with nobody connected over %s (%.0f µs/s CPU, %.1f cmds/s) subtracted",
		slices, slice, bgDur, bg.cpuUs, bg.calls)
	floorNote := fmt.Sprintf("floor: one ZADD per user per seat tick (%s, the naive lease renewal), %d ZADDs in one pipeline per tick, %d ticks per batch, half the batches before and half after chatd's window", seatTick, users, ticks)
	b.rep.add(newRow(scen, "Redis CPU per idle user per minute", "µs", cpu).vs("floor ZADD/tick", fCPU).note("%s; %s", where, floorNote))
	b.rep.add(newRow(scen, "Redis commands per idle user per minute (commandstats, script-inner counted)", "cmds", calls).vs("floor ZADD/tick", fCalls).
		note("per user per minute in the last slice, background not subtracted: %s", topCmds(perUserMinute(last.byCmd, last.el), users, 10)))
	b.rep.add(newRow(scen, "Redis total_commands_processed per idle user per minute (INFO stats)", "cmds", processed))
	b.rep.add(newRow(scen, "idle Redis commands per second per 100 connected users (commandstats)", "cmds/s", cmdsPer100).goalValue(false, 1))
	b.rep.add(newRow(scen, "idle Redis CPU scaled to 100,000 connected users", "% of a core", pctAt100k).goalValue(false, 5).
		note("per-user CPU × 100,000, linear: Redis's per-command overhead, not its cache, is what this scales"))
	b.rep.check(scen, "every idle connection stayed open through the window", lost == 0, "%d of %d dropped", lost, users)
	if math.IsNaN(median(cpu)) {
		return errors.New("no idle slice measured")
	}
	return nil
}
