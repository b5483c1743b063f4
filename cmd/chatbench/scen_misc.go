package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// settingsRate is how many motd writes per second the settings scenario
// makes (and the A2 comparison publishes).
const settingsRate = 20

// scenarioSettings: PUT motd on the first node at a fixed rate while
// WebSocket clients on every node wait for the settings frames: the time
// until the last client has it, and no version skipped; against A2 (raw
// pub/sub at the same rate) interleaved.
func (b *Bench) scenarioSettings(ctx context.Context) error {
	const perNode = 3
	nt := len(b.w.Targets)
	tag := b.tag("m")
	type seen struct {
		seq     int
		version int64
		at      time.Time
	}
	type watcher struct {
		ws   *WS
		mu   sync.Mutex
		got  []seen
		done chan struct{}
	}
	ws := make([]*watcher, perNode*nt)
	err := parallel(ctx, len(ws), 8, func(i int) error {
		base := b.w.Targets[i%nt]
		tok, err := b.api.Session(ctx, base, tag+"x"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		c, _, err := dialWS(ctx, base, tok)
		if err != nil {
			return err
		}
		w := &watcher{ws: c, done: make(chan struct{})}
		ws[i] = w
		go func() {
			defer close(w.done)
			var f Frame
			for {
				if err := c.Read(&f); err != nil {
					return
				}
				if f.Type != "settings" || f.Key != "motd" {
					continue
				}
				v, _ := f.Value.(string)
				if !strings.HasPrefix(v, tag+" ") {
					continue
				}
				seq, _ := strconv.Atoi(strings.TrimPrefix(v, tag+" "))
				w.mu.Lock()
				w.got = append(w.got, seen{seq, f.Version, time.Now()})
				w.mu.Unlock()
			}
		}()
		return nil
	})
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.ws.Close()
				<-w.done
			}
		}
	}()
	if err != nil {
		return fmt.Errorf("settings set-up: %w", err)
	}
	defer func() {
		if err := b.api.ResetSetting(context.WithoutCancel(ctx), b.w.Targets[0], "motd"); err != nil {
			b.rep.fail("settings", fmt.Errorf("reset motd: %w", err))
		}
	}()

	var a2p99, lastP50, lastP99, anyP50 []float64
	var problems []string
	var cmds string
	var putMs []float64
	seq := 0
	for ri, ord := range order(b.opt.Repeats, 2) {
		for _, v := range ord {
			if v == 0 {
				b.prog.Say("settings: A2 pub/sub at %d/s rep %d/%d", settingsRate, ri+1, b.opt.Repeats)
				_, l, err := b.pubsubRun(ctx, settingsRate, b.opt.Dur)
				if err != nil {
					return err
				}
				a2p99 = append(a2p99, l.P99)
				continue
			}
			b.prog.Say("settings: motd writes at %d/s rep %d/%d", settingsRate, ri+1, b.opt.Repeats)
			for _, w := range ws {
				w.mu.Lock()
				w.got = w.got[:0]
				w.mu.Unlock()
			}
			sent := map[int]time.Time{}
			versions := map[int]int64{}
			first := seq + 1
			// sequential writes at the fixed rate, as an admin would make them
			iv := time.Second / settingsRate
			c0, _ := b.cmdStats(ctx)
			var putL Lat
			t0 := time.Now()
			// bounded in count and time: a slow PUT makes fewer writes
			for k := 0; time.Duration(k)*iv < b.opt.Dur && time.Since(t0) < b.opt.Dur && ctx.Err() == nil; k++ {
				time.Sleep(time.Until(t0.Add(time.Duration(k) * iv)))
				seq++
				at := time.Now()
				ver, err := b.api.SetSetting(ctx, b.w.Targets[0], "motd", tag+" "+strconv.Itoa(seq))
				putL.Add(time.Since(at))
				if err != nil {
					return fmt.Errorf("PUT motd: %w", err)
				}
				sent[seq], versions[seq] = at, ver
			}
			last := seq
			c1, _ := b.cmdStats(ctx)
			d, total := cmdDelta(c0, c1)
			n := max(1, last-first+1)
			cmds = fmt.Sprintf("%d writes; Redis %.0f cmds/PUT: %s", n, float64(total)/float64(n), topCmds(d, n, 4))
			putMs = append(putMs, putL.Summary().P50)
			complete := func() bool {
				for _, w := range ws {
					w.mu.Lock()
					n := len(w.got)
					var top int
					if n > 0 {
						top = w.got[n-1].seq
					}
					w.mu.Unlock()
					if top < last {
						return false
					}
				}
				return true
			}
			waitFor(ctx, 15*time.Second, complete)
			var lastL, anyL Lat
			for s := first; s <= last; s++ {
				var worst time.Duration
				for _, w := range ws {
					w.mu.Lock()
					for _, g := range w.got {
						if g.seq == s {
							d := g.at.Sub(sent[s])
							anyL.Add(d)
							worst = max(worst, d)
						}
					}
					w.mu.Unlock()
				}
				lastL.Add(worst)
			}
			for i, w := range ws {
				w.mu.Lock()
				var prev int64
				missing := 0
				have := map[int]bool{}
				for _, g := range w.got {
					if g.version <= prev {
						problems = append(problems, fmt.Sprintf("client %d on %s: version %d after %d", i, b.w.Targets[i%nt], g.version, prev))
					}
					prev = g.version
					have[g.seq] = true
					if versions[g.seq] != g.version {
						problems = append(problems, fmt.Sprintf("client %d: write %d had version %d, frame says %d", i, g.seq, versions[g.seq], g.version))
					}
				}
				for s := first; s <= last; s++ {
					if !have[s] {
						missing++
					}
				}
				if missing > 0 {
					problems = append(problems, fmt.Sprintf("client %d on %s missed %d of %d writes", i, b.w.Targets[i%nt], missing, last-first+1))
				}
				w.mu.Unlock()
			}
			// chatd marks every live poll session dirty after each PUT, in
			// the background: let that finish before the anchor runs
			b.quiesce(ctx)
			ls, as := lastL.Summary(), anyL.Summary()
			lastP50, lastP99, anyP50 = append(lastP50, ls.P50), append(lastP99, ls.P99), append(anyP50, as.P50)
		}
	}
	scen := fmt.Sprintf("settings, %d clients on %d node(s)", len(ws), nt)
	b.rep.add(newRow(scen, fmt.Sprintf("A2 raw pub/sub p99 at %d/s", settingsRate), "ms", a2p99))
	b.rep.add(newRow(scen, "PUT → a client has the frame, p50", "ms", anyP50))
	b.rep.add(newRow(scen, "PUT → last client has it, p50", "ms", lastP50))
	b.rep.add(newRow(scen, "PUT → last client has it, p99", "ms", lastP99).vs("A2 p99", a2p99).goalRatio(false, 5))
	b.rep.add(newRow(scen, "PUT /settings/motd answer p50", "ms", putMs).note("last run: %s (marking every live poll session dirty runs after the answer)", cmds))
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Sprintf("… %d more", len(problems)-5))
	}
	b.rep.check(scen, "every client got every version, in order, none skipped", len(problems) == 0, "%s", strings.Join(problems, "; "))
	return nil
}

// scenarioIdle: RSS per idle WebSocket connection (hello received, nothing
// else) on the first chatd node, against the bare hub without Redis.
func (b *Bench) scenarioIdle(ctx context.Context) error {
	if len(b.w.Nodes) == 0 {
		return fmt.Errorf("idle: needs chatd processes chatbench started (their pids); skipped with -targets")
	}
	k := b.opt.scale(5000, 1000)
	measure := func(p *Proc) (float64, error) {
		tag := b.tag("i")
		toks := make([]string, k)
		if err := parallel(ctx, k, 32, func(i int) error {
			var err error
			toks[i], err = b.api.Session(ctx, p.URL, tag+"x"+strconv.Itoa(i))
			return err
		}); err != nil {
			return 0, err
		}
		time.Sleep(500 * time.Millisecond)
		before, err := p.RSS()
		if err != nil {
			return 0, err
		}
		conns := make([]*WS, k)
		defer func() {
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
		}()
		b.prog.Say("idle: opening %d WebSockets to %s", k, p.Name)
		if err := parallel(ctx, k, 32, func(i int) error {
			c, _, err := dialWS(ctx, p.URL, toks[i])
			conns[i] = c
			return err
		}); err != nil {
			return 0, err
		}
		time.Sleep(2 * time.Second)
		after, err := p.RSS()
		if err != nil {
			return 0, err
		}
		return float64(after-before) / float64(k) / 1024, nil
	}
	hub, err := measure(b.w.Hub0)
	if err != nil {
		return fmt.Errorf("idle on the bare hub: %w", err)
	}
	chatd, err := measure(b.w.Nodes[0])
	if err != nil {
		return fmt.Errorf("idle on chatd: %w", err)
	}
	scen := fmt.Sprintf("idle connections, %d on one node", k)
	b.rep.add(newRow(scen, "bare hub (A3) RSS per idle WebSocket", "KiB", []float64{hub}))
	b.rep.add(newRow(scen, "chatd RSS per idle WebSocket", "KiB", []float64{chatd}).vs("bare hub", []float64{hub}).goalValue(false, 16).note("VmRSS delta / connections, one measurement"))
	return nil
}

// quiesce waits (at most 15 s) until Redis runs fewer than 1,000 commands a
// second, so work a run left behind does not load the next one.
func (b *Bench) quiesce(ctx context.Context) { b.quiesceBelow(ctx, 1000, 15*time.Second) }

// quiesceBelow waits (at most limit) until Redis has run fewer than
// perSec commands a second for a second on end (five 200-ms looks in a
// row). One quiet look was not enough: hub runs that followed chatd's
// counted chatd's presence_offline for the users that had left (0.2 a
// say of the hub: its EVALSHA, HGETALL and two HGETs in commandstats),
// and read the hub's Redis CPU per say up to 35 % high.
func (b *Bench) quiesceBelow(ctx context.Context, perSec int64, limit time.Duration) {
	prev, err := b.cmdStats(ctx)
	if err != nil {
		return
	}
	deadline := time.Now().Add(limit)
	for quiet := 0; quiet < 5 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(200 * time.Millisecond)
		cur, err := b.cmdStats(ctx)
		if err != nil {
			return
		}
		if _, n := cmdDelta(prev, cur); n < perSec/5 {
			quiet++
		} else {
			quiet = 0
		}
		prev = cur
	}
	if time.Now().After(deadline) {
		fmt.Fprintf(os.Stderr, "chatbench: Redis did not go quiet (%d commands/s) within %s; the next run carries what it still runs\n", perSec, limit)
	}
}
