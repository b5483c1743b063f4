package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// joinWorkers is the concurrency of the join storm and its anchor.
const joinWorkers = 64

// sessions creates n sessions named prefix+"x"+i, spread over the targets.
func (b *Bench) sessions(ctx context.Context, prefix string, n int) ([]string, error) {
	toks := make([]string, n)
	nt := len(b.w.Targets)
	err := parallel(ctx, n, 32, func(i int) error {
		t, err := b.api.Session(ctx, b.w.Targets[i%nt], prefix+"x"+strconv.Itoa(i))
		toks[i] = t
		return err
	})
	return toks, err
}

// scenarioJoin: a storm of REST joins over every node against the raw
// seat claim (rooms.Seats.Join on Redis, no HTTP), then a pass with capacity 1
// where every join makes a room; the room count is checked after each run.
func (b *Bench) scenarioJoin(ctx context.Context) error {
	n, n2 := b.opt.scale(10000, 2000), b.opt.scale(1000, 200)
	b.prog.Say("join: %d sessions", n)
	toks, err := b.sessions(ctx, b.tag("j"), n)
	if err != nil {
		return err
	}
	pass := func(capacity int, toks []string) error {
		scen := fmt.Sprintf("join storm %d, capacity %d", len(toks), capacity)
		var anchor, rate, p50, p99 []float64
		var bad []string
		var cmds string
		reps := min(b.opt.Repeats, 3) // one chatd run of 10,000 joins is long enough
		for ri, ord := range order(reps, 2) {
			for _, v := range ord {
				if v == 0 {
					b.prog.Say("%s: raw seat claim rep %d/%d", scen, ri+1, reps)
					r, err := b.seatClaims(ctx, len(toks), joinWorkers, capacity)
					if err != nil {
						return fmt.Errorf("raw seat claim: %w", err)
					}
					anchor = append(anchor, r)
					continue
				}
				b.prog.Say("%s: chatd rep %d/%d", scen, ri+1, reps)
				c0, _ := b.cmdStats(ctx)
				r, lat, problem, err := b.joinStorm(ctx, toks, capacity)
				if err != nil {
					return err
				}
				c1, _ := b.cmdStats(ctx)
				d, total := cmdDelta(c0, c1)
				cmds = fmt.Sprintf("Redis %.1f cmds/join: %s", float64(total)/float64(len(toks)), topCmds(d, len(toks), 5))
				rate, p50, p99 = append(rate, r), append(p50, lat.P50), append(p99, lat.P99)
				if problem != "" {
					bad = append(bad, problem)
				}
			}
		}
		b.rep.add(newRow(scen, "raw seat claim (rooms.Join on Redis, 64 goroutines)", "joins/s", anchor))
		b.rep.add(newRow(scen, fmt.Sprintf("chatd REST joins over %d node(s), 64 clients", len(b.w.Targets)), "joins/s", rate).vs("raw seat claim", anchor).goalRatio(true, 0.1).note("%s", cmds))
		b.rep.add(newRow(scen, "join p50 under the storm (saturated)", "ms", p50))
		b.rep.add(newRow(scen, "join p99 under the storm (saturated)", "ms", p99))
		want := roomsFor(len(toks), capacity)
		b.rep.check(scen, fmt.Sprintf("exactly %d rooms, none over %d, everyone seated, in every run", want, capacity), len(bad) == 0, "%s", strings.Join(bad, "; "))
		return nil
	}
	if err := pass(50, toks); err != nil {
		return err
	}
	t0 := b.w.Targets[0]
	if _, err := b.api.SetSetting(ctx, t0, "room.capacity", 1); err != nil {
		return fmt.Errorf("set room.capacity 1: %w", err)
	}
	defer func() {
		if err := b.api.ResetSetting(context.WithoutCancel(ctx), t0, "room.capacity"); err != nil {
			b.rep.fail("join", fmt.Errorf("reset room.capacity: %w", err))
		}
	}()
	if err := b.waitSetting(ctx, "room.capacity", 1); err != nil {
		return err
	}
	if err := b.waitCapacity(ctx, 1); err != nil {
		return err
	}
	return pass(1, toks[:n2])
}

// joinStorm joins every token to a fresh lobby from joinWorkers clients,
// round-robin over the nodes, then checks the lobby's rooms. problem is ""
// when the rooms are exactly right.
func (b *Bench) joinStorm(ctx context.Context, toks []string, capacity int) (float64, Summary, string, error) {
	lobby := "js-" + b.tag("l")
	nt := len(b.w.Targets)
	var lat Lat
	t0 := time.Now()
	err := parallel(ctx, len(toks), joinWorkers, func(i int) error {
		s := time.Now()
		var out struct {
			Room Room `json:"room"`
		}
		if _, err := b.api.Do(ctx, http.MethodPost, b.w.Targets[i%nt]+"/api/v1/lobbies/"+lobby+"/join", toks[i], nil, &out); err != nil {
			return fmt.Errorf("join %s: %w", lobby, err)
		}
		lat.Add(time.Since(s))
		if out.Room.ID == "" {
			return errors.New("join answered no room")
		}
		return nil
	})
	rate := float64(len(toks)) / time.Since(t0).Seconds()
	if err != nil {
		return rate, Summary{}, "", err
	}
	var rs struct {
		Rooms []Room `json:"rooms"`
	}
	if _, err := b.api.Do(ctx, http.MethodGet, b.w.Targets[0]+"/api/v1/lobbies/"+lobby+"/rooms", toks[0], nil, &rs); err != nil {
		return rate, lat.Summary(), "", err
	}
	seated, fullest := 0, 0
	for _, r := range rs.Rooms {
		seated += len(r.Members)
		fullest = max(fullest, len(r.Members))
	}
	problem := ""
	if want := roomsFor(len(toks), capacity); len(rs.Rooms) != want || fullest > capacity || seated != len(toks) {
		problem = fmt.Sprintf("%s: %d rooms (want %d), %d seated of %d, fullest %d", lobby, len(rs.Rooms), want, seated, len(toks), fullest)
	}
	return rate, lat.Summary(), problem, nil
}

// fixedRate calls f(i) at rate per second for dur, open loop (at most 512
// outstanding; later calls are skipped and counted), and records each
// call's latency in lats[kind(i)].
func fixedRate(ctx context.Context, rate float64, dur time.Duration, kinds int, f func(i int) (kind int, err error)) ([]*Lat, int, error) {
	lats := make([]*Lat, kinds)
	for i := range lats {
		lats[i] = &Lat{}
	}
	var (
		wg       sync.WaitGroup
		inflight atomic.Int64
		skipped  int
		mu       sync.Mutex
		first    error
	)
	iv := time.Duration(float64(time.Second) / rate)
	t0 := time.Now()
	for i := 0; ; i++ {
		at := t0.Add(time.Duration(i) * iv)
		if at.Sub(t0) >= dur || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Until(at))
		if inflight.Load() >= 512 {
			skipped++
			continue
		}
		inflight.Add(1)
		wg.Go(func() {
			defer inflight.Add(-1)
			s := time.Now()
			k, err := f(i)
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
				return
			}
			lats[k].Add(time.Since(s))
		})
	}
	wg.Wait()
	return lats, skipped, first
}

// scenarioBoard: score posts/s against A5, top and rank latency at a fixed
// rate against /healthz at the same rate, and a 100-player rank batch
// against 100 sequential reads.
func (b *Bench) scenarioBoard(ctx context.Context) error {
	players := b.opt.scale(100000, 10000)
	board := "lb-" + b.tag("b")
	nt := len(b.w.Targets)
	toks, err := b.sessions(ctx, b.tag("w"), httpWorkers)
	if err != nil {
		return err
	}
	var next atomic.Int64
	post := func(w int) error {
		i := next.Add(1) - 1
		body := map[string]any{"player": "p" + strconv.FormatInt(i%int64(players), 10), "score": rand.IntN(1000000), "mode": "best"}
		_, err := b.api.Do(ctx, http.MethodPost, b.w.Targets[w%nt]+"/api/v1/leaderboards/"+board+"/scores", toks[w], body, nil)
		return err
	}
	postFor := func(dur time.Duration) (float64, error) {
		var n atomic.Int64
		var first error
		var mu sync.Mutex
		end := time.Now().Add(dur)
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range httpWorkers {
			wg.Go(func() {
				for time.Now().Before(end) && ctx.Err() == nil {
					if err := post(w); err != nil {
						mu.Lock()
						first = err
						mu.Unlock()
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return float64(n.Load()) / time.Since(t0).Seconds(), first
	}
	hubs := procURLs(b.w.Hubs[:nt])
	var a5, posts []float64
	var cmds string
	for ri, ord := range order(b.opt.Repeats, 2) {
		for _, v := range ord {
			if v == 0 {
				b.prog.Say("leaderboard: A5 healthz rep %d/%d", ri+1, b.opt.Repeats)
				r, err := b.httpRateOver(ctx, hubs, "/healthz")
				if err != nil {
					return err
				}
				a5 = append(a5, r)
			} else {
				b.prog.Say("leaderboard: score posts rep %d/%d (%d players so far)", ri+1, b.opt.Repeats, min(next.Load(), int64(players)))
				c0, _ := b.cmdStats(ctx)
				n0 := next.Load()
				r, err := postFor(b.opt.Dur)
				if err != nil {
					return fmt.Errorf("post score: %w", err)
				}
				c1, _ := b.cmdStats(ctx)
				d, total := cmdDelta(c0, c1)
				n := int(next.Load() - n0)
				cmds = fmt.Sprintf("Redis %.1f cmds/post: %s", float64(total)/float64(max(1, n)), topCmds(d, max(1, n), 5))
				posts = append(posts, r)
			}
		}
	}
	scen := fmt.Sprintf("leaderboard %d players", players)
	b.rep.add(newRow(scen, fmt.Sprintf("score posts, %d clients over %d node(s)", httpWorkers, nt), "posts/s", posts).vs("A5 healthz", a5).goalRatio(true, 0.5).note("%s", cmds))
	if rest := int64(players) - next.Load(); rest > 0 {
		b.prog.Say("leaderboard: filling the board to %d players", players)
		if err := parallel(ctx, int(rest), httpWorkers, func(i int) error { return post(i % httpWorkers) }); err != nil {
			return fmt.Errorf("fill board: %w", err)
		}
	}

	// top and rank at a fixed rate, against /healthz at the same rate
	const rate = 200
	var hz99, top50, top99, rank50, rank99 []float64
	reps := min(b.opt.Repeats, 3)
	for ri, ord := range order(reps, 2) {
		for _, v := range ord {
			b.prog.Say("leaderboard: reads at %d/s rep %d/%d", rate, ri+1, reps)
			if v == 0 {
				lats, _, err := fixedRate(ctx, rate, b.opt.Dur, 1, func(i int) (int, error) {
					_, err := b.api.Do(ctx, http.MethodGet, hubs[i%len(hubs)]+"/healthz", "", nil, nil)
					return 0, err
				})
				if err != nil {
					return err
				}
				hz99 = append(hz99, lats[0].Summary().P99)
				continue
			}
			lats, _, err := fixedRate(ctx, rate, b.opt.Dur, 2, func(i int) (int, error) {
				base := b.w.Targets[i%nt] + "/api/v1/leaderboards/" + board
				if i%2 == 0 {
					var out struct {
						Entries []json0 `json:"entries"`
					}
					_, err := b.api.Do(ctx, http.MethodGet, base+"/top?limit=10", toks[i%len(toks)], nil, &out)
					if err == nil && len(out.Entries) != 10 {
						err = fmt.Errorf("top answered %d entries", len(out.Entries))
					}
					return 0, err
				}
				var out struct {
					Entry struct {
						Rank int `json:"rank"`
					} `json:"entry"`
				}
				_, err := b.api.Do(ctx, http.MethodGet, base+"/players/p"+strconv.Itoa(rand.IntN(players)), toks[i%len(toks)], nil, &out)
				return 1, err
			})
			if err != nil {
				return err
			}
			t, r := lats[0].Summary(), lats[1].Summary()
			top50, top99, rank50, rank99 = append(top50, t.P50), append(top99, t.P99), append(rank50, r.P50), append(rank99, r.P99)
		}
	}
	at := fmt.Sprintf(" at %d req/s", rate)
	b.rep.add(newRow(scen, "bare Fiber GET /healthz p99"+at, "ms", hz99))
	b.rep.add(newRow(scen, "GET top?limit=10 p50"+at, "ms", top50))
	b.rep.add(newRow(scen, "GET top?limit=10 p99"+at, "ms", top99).vs("healthz p99", hz99))
	b.rep.add(newRow(scen, "GET players/{p} (rank) p50"+at, "ms", rank50))
	b.rep.add(newRow(scen, "GET players/{p} (rank) p99"+at, "ms", rank99).vs("healthz p99", hz99))

	// 100 players: one batch vs 100 sequential reads, interleaved
	var batch, seq []float64
	for ri := range reps {
		b.prog.Say("leaderboard: 100-player batch vs sequential rep %d/%d", ri+1, reps)
		var bt, st []float64
		for k := range 5 {
			ps := make([]string, 100)
			for i := range ps {
				ps[i] = "p" + strconv.Itoa(rand.IntN(players))
			}
			base := b.w.Targets[k%nt] + "/api/v1/leaderboards/" + board
			runBatch := func() error {
				s := time.Now()
				var out struct {
					Entries []json0 `json:"entries"`
				}
				if _, err := b.api.Do(ctx, http.MethodPost, base+"/ranks", toks[0], map[string]any{"players": ps}, &out); err != nil {
					return err
				}
				if len(out.Entries) != len(ps) {
					return fmt.Errorf("ranks answered %d entries for %d players", len(out.Entries), len(ps))
				}
				bt = append(bt, float64(time.Since(s))/1e6)
				return nil
			}
			runSeq := func() error {
				s := time.Now()
				for _, p := range ps {
					if _, err := b.api.Do(ctx, http.MethodGet, base+"/players/"+p, toks[0], nil, nil); err != nil {
						return err
					}
				}
				st = append(st, float64(time.Since(s))/1e6)
				return nil
			}
			first, second := runBatch, runSeq
			if k%2 == 1 {
				first, second = runSeq, runBatch
			}
			if err := first(); err != nil {
				return err
			}
			if err := second(); err != nil {
				return err
			}
		}
		batch, seq = append(batch, median(bt)), append(seq, median(st))
	}
	b.rep.add(newRow(scen, "100 ranks, sequential GET players/{p}", "ms", seq))
	b.rep.add(newRow(scen, "100 ranks, one POST /ranks batch", "ms", batch))
	b.rep.add(newRow(scen, "batch speed-up (sequential time / batch time)", "×", ratios(seq, batch)).goalValue(true, 10))
	return nil
}

// json0 is an entry whose fields the benchmark does not need (it is still
// decoded).
type json0 = map[string]any

// cmdStats reads INFO commandstats: calls per command.
func (b *Bench) cmdStats(ctx context.Context) (map[string]int64, error) {
	s, err := b.w.Redis.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(s, "\n") {
		if name, rest, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			addCmdstat(out, name, rest)
		}
	}
	return out, nil
}

// addCmdstat records in calls the call count of one INFO commandstats
// line, "cmdstat_<command>:calls=N,usec=…", split at its ':' into name
// and rest; any other line is left alone.
func addCmdstat(calls map[string]int64, name, rest string) {
	cmd, ok := strings.CutPrefix(name, "cmdstat_")
	if !ok {
		return
	}
	for _, kv := range strings.Split(rest, ",") {
		if k, v, _ := strings.Cut(kv, "="); k == "calls" {
			n, _ := strconv.ParseInt(v, 10, 64)
			calls[cmd] = n
		}
	}
}

// cmdDelta is after-before per command, leaving INFO out.
func cmdDelta(before, after map[string]int64) (map[string]int64, int64) {
	d := map[string]int64{}
	var total int64
	for k, v := range after {
		if k == "info" {
			continue
		}
		if x := v - before[k]; x > 0 {
			d[k] = x
			total += x
		}
	}
	return d, total
}

// topCmds formats the commands of d per poll, most first.
func topCmds(d map[string]int64, per int, k int) string {
	type kv struct {
		k string
		v int64
	}
	var s []kv
	for n, v := range d {
		s = append(s, kv{n, v})
	}
	sort.Slice(s, func(i, j int) bool { return s[i].v > s[j].v })
	var parts []string
	for i, e := range s {
		if i == k {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2f", e.k, float64(e.v)/float64(per)))
	}
	return strings.Join(parts, ", ")
}

type pollSession struct {
	user, tok, base, room, last string
}

// pollAnswer is GET /poll's answer, decoded.
type pollAnswer struct {
	Dirty []string                   `json:"dirty"`
	Data  map[string]json.RawMessage `json:"data"`
	size  int
}

// scenarioPoll: REST clients polling with 1% of them made dirty per pass,
// against the naive client that fetches every section's endpoint; Redis
// commands per clean poll; long-poll wake-up latency.
func (b *Bench) scenarioPoll(ctx context.Context) error {
	m := b.opt.scale(2000, 500)
	tag := b.tag("q")
	lobby, board := "pl-"+tag, "pb-"+tag
	b.prog.Say("poll: %d sessions join %s", m, lobby)
	ss, err := b.seatPollSessions(ctx, tag, lobby, m)
	if err != nil {
		return fmt.Errorf("poll set-up: %w", err)
	}
	scen := fmt.Sprintf("polling %d sessions", m)

	// one more pass clears what later joins made dirty
	if err := parallel(ctx, m, httpWorkers, func(i int) error { _, err := b.pollOnce(ctx, ss[i], ""); return err }); err != nil {
		return err
	}
	// commands per clean poll: one pass with nothing dirty, minus the
	// background rate measured just before over the same time
	b.prog.Say("poll: Redis commands per clean poll")
	bg0, err := b.cmdStats(ctx)
	if err != nil {
		return err
	}
	time.Sleep(time.Second)
	bg1, _ := b.cmdStats(ctx)
	_, bgTotal := cmdDelta(bg0, bg1)
	c0, _ := b.cmdStats(ctx)
	t0 := time.Now()
	var dirtyClean atomic.Int64
	if err := parallel(ctx, m, httpWorkers, func(i int) error {
		a, err := b.pollOnce(ctx, ss[i], "")
		if len(a.Dirty) > 0 {
			dirtyClean.Add(1)
		}
		return err
	}); err != nil {
		return err
	}
	el := time.Since(t0)
	c1, _ := b.cmdStats(ctx)
	d, total := cmdDelta(c0, c1)
	bg := float64(bgTotal) * el.Seconds()
	perPoll := (float64(total) - bg) / float64(m)
	b.rep.add(newRow(scen, "Redis commands per clean poll (INFO commandstats, background subtracted)", "cmds", []float64{perPoll}).
		goalValue(false, 1.05).note("raw %.2f/poll: %s; background %.0f cmds/s; %d of %d polls were not clean", float64(total)/float64(m), topCmds(d, m, 4), float64(bgTotal), dirtyClean.Load(), m))

	var smart, naive, frac, bytesSmart, bytesNaive []float64
	for ri, ord := range order(b.opt.Repeats, 2) {
		for _, v := range ord {
			if v == 0 {
				b.prog.Say("poll: naive full-state polling rep %d/%d", ri+1, b.opt.Repeats)
				r, by, err := b.naivePolls(ctx, ss, board)
				if err != nil {
					return err
				}
				naive, bytesNaive = append(naive, r), append(bytesNaive, by)
				continue
			}
			b.prog.Say("poll: dirty-mask polling, 1%% dirty per pass, rep %d/%d", ri+1, b.opt.Repeats)
			r, f, by, err := b.smartPolls(ctx, ss)
			if err != nil {
				return err
			}
			smart, frac, bytesSmart = append(smart, r), append(frac, f), append(bytesSmart, by)
		}
	}
	b.rep.add(newRow(scen, "naive polls (5 GETs: settings, wallet, room, messages, board entry)", "polls/s", naive))
	b.rep.add(newRow(scen, "GET /poll, 1% made dirty per pass", "polls/s", smart).vs("naive", naive).goalRatio(true, 5))
	b.rep.add(newRow(scen, "fraction of polls that found something dirty", "", frac))
	b.rep.add(newRow(scen, "bytes per GET /poll", "B", bytesSmart).vs("naive", bytesNaive))

	// long-poll wake-up
	var wake50, wake99 []float64
	for ri := range b.opt.Repeats {
		b.prog.Say("poll: long-poll wake-up rep %d/%d", ri+1, b.opt.Repeats)
		l, err := b.longPollWake(ctx, ss[:min(20, m)])
		if err != nil {
			return err
		}
		s := l.Summary()
		wake50, wake99 = append(wake50, s.P50), append(wake99, s.P99)
	}
	b.rep.add(newRow(scen, "long-poll wake-up p50 (grant → poll answers), 10 wakes/s", "ms", wake50))
	b.rep.add(newRow(scen, "long-poll wake-up p99 (grant → poll answers), 10 wakes/s", "ms", wake99))
	return nil
}

// pollOnce is one GET /poll (wait "" for none); it remembers the newest
// message id of the session's room.
// seatPollSessions signs n REST sessions in (users tag+"x"+i, round robin
// over the targets), joins each to lobby and polls it once (the first
// poll answers the full state, so later clean polls are clean).
func (b *Bench) seatPollSessions(ctx context.Context, tag, lobby string, n int) ([]*pollSession, error) {
	nt := len(b.w.Targets)
	ss := make([]*pollSession, n)
	err := parallel(ctx, n, 32, func(i int) error {
		s := &pollSession{user: tag + "x" + strconv.Itoa(i), base: b.w.Targets[i%nt]}
		var err error
		if s.tok, err = b.api.Session(ctx, s.base, s.user); err != nil {
			return err
		}
		var out struct {
			Room Room `json:"room"`
		}
		if _, err := b.api.Do(ctx, http.MethodPost, s.base+"/api/v1/lobbies/"+lobby+"/join", s.tok, nil, &out); err != nil {
			return err
		}
		s.room = out.Room.ID
		ss[i] = s
		_, err = b.pollOnce(ctx, s, "") // the first poll: full state
		return err
	})
	return ss, err
}

func (b *Bench) pollOnce(ctx context.Context, s *pollSession, wait string) (pollAnswer, error) {
	var a pollAnswer
	u := s.base + "/api/v1/poll"
	if wait != "" {
		u += "?wait=" + wait
	}
	n, err := b.api.Do(ctx, http.MethodGet, u, s.tok, nil, &a)
	if err != nil {
		return a, fmt.Errorf("poll %s: %w", s.user, err)
	}
	a.size = n
	if raw, ok := a.Data["messages"]; ok {
		var msgs map[string][]Message
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return a, fmt.Errorf("poll %s: messages: %w", s.user, err)
		}
		if l := msgs[s.room]; len(l) > 0 {
			s.last = l[len(l)-1].ID
		}
	}
	return a, nil
}

// smartPolls polls every session once per pass, after granting 1 coin to
// 1% of them, for the run's duration. It returns polls/s, the fraction
// found dirty and bytes per poll.
func (b *Bench) smartPolls(ctx context.Context, ss []*pollSession) (float64, float64, float64, error) {
	var polls, dirty, bytes atomic.Int64
	t0 := time.Now()
	for time.Since(t0) < b.opt.Dur && ctx.Err() == nil {
		k := max(1, len(ss)/100)
		for _, i := range rand.Perm(len(ss))[:k] {
			if _, err := b.api.Do(ctx, http.MethodPost, b.w.Targets[0]+"/api/v1/wallet/grant", b.opt.Admin, map[string]any{"user": ss[i].user, "amount": 1}, nil); err != nil {
				return 0, 0, 0, fmt.Errorf("wallet grant: %w", err)
			}
		}
		if err := parallel(ctx, len(ss), httpWorkers, func(i int) error {
			a, err := b.pollOnce(ctx, ss[i], "")
			polls.Add(1)
			bytes.Add(int64(a.size))
			if len(a.Dirty) > 0 {
				dirty.Add(1)
			}
			return err
		}); err != nil {
			return 0, 0, 0, err
		}
	}
	p := float64(polls.Load())
	return p / time.Since(t0).Seconds(), float64(dirty.Load()) / p, float64(bytes.Load()) / p, nil
}

// naivePolls is the comparison: each poll fetches every section's endpoint.
func (b *Bench) naivePolls(ctx context.Context, ss []*pollSession, board string) (float64, float64, error) {
	var polls, bytes atomic.Int64
	t0 := time.Now()
	for time.Since(t0) < b.opt.Dur && ctx.Err() == nil {
		if err := parallel(ctx, len(ss), httpWorkers, func(i int) error {
			s := ss[i]
			msgs := s.base + "/api/v1/rooms/" + s.room + "/messages?limit=50"
			if s.last != "" {
				msgs += "&after=" + url.QueryEscape(s.last)
			}
			for _, u := range []string{
				s.base + "/api/v1/settings", s.base + "/api/v1/wallet", s.base + "/api/v1/rooms/" + s.room, msgs,
				s.base + "/api/v1/leaderboards/" + board + "/players/" + s.user,
			} {
				var out map[string]any
				n, err := b.api.Do(ctx, http.MethodGet, u, s.tok, nil, &out)
				var ae *APIError
				if err != nil && !(errors.As(err, &ae) && ae.Status == http.StatusNotFound) {
					return err
				}
				bytes.Add(int64(n))
			}
			polls.Add(1)
			return nil
		}); err != nil {
			return 0, 0, err
		}
	}
	p := float64(polls.Load())
	return p / time.Since(t0).Seconds(), float64(bytes.Load()) / p, nil
}

// longPollWake parks each session in GET /poll?wait=20 and, 10 times a
// second, grants a parked one a coin: the latency is from just before the
// grant to the poll's answer.
func (b *Bench) longPollWake(ctx context.Context, ss []*pollSession) (*Lat, error) {
	var lat Lat
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type parked struct {
		kick  atomic.Int64 // unix ns of the grant, 0 = none
		ready atomic.Bool
	}
	ps := make([]*parked, len(ss))
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var first error
	for i, s := range ss {
		p := &parked{}
		ps[i] = p
		wg.Go(func() {
			for ctx.Err() == nil {
				p.kick.Store(0)
				go func() { // parked once the request surely reached the node
					time.Sleep(100 * time.Millisecond)
					p.ready.Store(true)
				}()
				a, err := b.pollOnce(ctx, s, "20")
				p.ready.Store(false)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					errMu.Lock()
					first = err
					errMu.Unlock()
					return
				}
				if k := p.kick.Load(); k != 0 && slices.Contains(a.Dirty, "wallet") {
					lat.Add(time.Duration(time.Now().UnixNano() - k))
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	end := time.Now().Add(b.opt.Dur)
	for time.Now().Before(end) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		for _, i := range rand.Perm(len(ss)) {
			p := ps[i]
			if !p.ready.Load() || p.kick.Load() != 0 {
				continue
			}
			p.kick.Store(time.Now().UnixNano())
			if _, err := b.api.Do(ctx, http.MethodPost, b.w.Targets[0]+"/api/v1/wallet/grant", b.opt.Admin, map[string]any{"user": ss[i].user, "amount": 1}, nil); err != nil {
				cancel()
				wg.Wait()
				return &lat, fmt.Errorf("wallet grant: %w", err)
			}
			break
		}
	}
	// let the last wake arrive; cancelling ends the parked polls
	waitFor(ctx, time.Second, func() bool { return lat.Len() > 0 })
	cancel()
	wg.Wait()
	return &lat, first
}

// waitCapacity waits until a join on every node answers a room whose
// capacity is want: the node's live value, not only the stored one. A node
// that never does is recorded as a failed check.
func (b *Bench) waitCapacity(ctx context.Context, want int) error {
	tag := b.tag("c")
	for i, t := range b.w.Targets {
		tok, err := b.api.Session(ctx, t, tag+"x"+strconv.Itoa(i))
		if err != nil {
			return err
		}
		var got int
		t0 := time.Now()
		ok := waitFor(ctx, 10*time.Second, func() bool {
			var out struct {
				Room Room `json:"room"`
			}
			if _, err := b.api.Do(ctx, http.MethodPost, t+"/api/v1/lobbies/cap-"+tag+"/join", tok, nil, &out); err != nil {
				return false
			}
			got = out.Room.Capacity
			return got == want
		})
		if !ok {
			// measured anyway: the room check shows what it costs
			b.rep.check("join", fmt.Sprintf("node %d (%s) applies room.capacity %d within 10 s of the PUT on node 1", i+1, t, want), false, "its new rooms still show capacity %d", got)
			continue
		}
		if d := time.Since(t0); d > time.Second {
			b.rep.check("join", fmt.Sprintf("%s applies room.capacity %d within 1 s", t, want), false, "took %s", d.Truncate(time.Millisecond))
		}
	}
	return nil
}
