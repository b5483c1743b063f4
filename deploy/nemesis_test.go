package deploy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

// The nemesis: three real chatd processes on one private redis-server, the
// third reaching Redis through a TCP proxy the test owns, under mixed
// traffic spoken through the Go SDK while a seeded schedule of faults
// runs. At every Redis loss (SIGKILL, restarted empty) and at the end it
// checks invariants, not timings:
//
//   - every acked say and REST post of the epoch (the time between two
//     Redis losses) is in the room's history exactly once, and no text is
//     stored twice;
//   - every listener (a WebSocket member that stays, reconnects and
//     resumes) got every message of its room from its first of the epoch
//     on, each once, in id order;
//   - no user holds two seats in a lobby;
//   - coins are conserved (balance + price × items bought == coins
//     granted) and each acked purchase and increment is applied once:
//     acked ≤ applied ≤ acked + calls whose outcome is unknown, and no two
//     acked increments answered the same score;
//   - each node's RSS stays under nemesisRSSBoundMiB.
//
// Epochs: a Redis restarted empty loses the history, seats, wallets and
// boards, so everything is counted per epoch, and a call that began in one
// epoch and ended in the next is counted as unknown in both.
//
// CHATD_NEMESIS_SEED replays a schedule (the seed is logged);
// CHATD_NEMESIS_DURATION (a Go duration, default 45s of faults) lengthens
// the run.

// nemesisRSSBoundMiB bounds each node's resident memory during the run.
// Measured on a loaded 2-core machine: peaks of 23–27 MiB a node over a
// 45 s run; the bound leaves room for longer runs and the GC.
const nemesisRSSBoundMiB = 96

const (
	nemLobby   = "nem"
	nemChurn   = "churn"
	nemBoard   = "nem"
	nemItem    = "gem"
	nemPrice   = 3
	nemGrant   = 3000
	nemPlayer  = "p1"
	nemTalkers = 3
)

// nemOp is one write a worker made.
type nemOp struct {
	kind   string // say, post, incr, buy
	who    string
	text   string // say, post
	id     string // say, post: the acked message id
	score  float64
	g0, g1 int64 // epochs at the call's start and end
	seq    int64 // order of completion
	err    error
}

// nemesis is the state of one run.
type nemesis struct {
	t     *testing.T
	c     *chatdtest.Cluster
	adm   *client.Client
	proxy *tcpProxy
	rng   *rand.Rand

	epoch   atomic.Int64 // bumped when Redis is killed
	shopGen atomic.Int64 // the epoch whose grants are done
	seq     atomic.Int64

	mu         sync.Mutex
	ops        []nemOp
	violations []string
	counts     map[string]int
	peakRSS    map[string]int // node → KiB

	listeners []*sdkMember
	shoppers  []*client.Client
}

func (n *nemesis) record(op nemOp) {
	op.seq = n.seq.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ops = append(n.ops, op)
	key := op.kind + " ok"
	if op.err != nil {
		key = op.kind + " failed"
	}
	n.counts[key]++
}

func (n *nemesis) count(what string) {
	n.mu.Lock()
	n.counts[what]++
	n.mu.Unlock()
}

func (n *nemesis) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.mu.Lock()
	n.violations = append(n.violations, msg)
	n.mu.Unlock()
	n.t.Log("VIOLATION: " + msg)
}

func (n *nemesis) opsOf(kind string, gen int64) (acked, unknown []nemOp) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, op := range n.ops {
		if op.kind != kind || (op.g0 != gen && op.g1 != gen) {
			continue
		}
		if op.err == nil && op.g0 == gen && op.g1 == gen {
			acked = append(acked, op)
		} else {
			unknown = append(unknown, op)
		}
	}
	return acked, unknown
}

func nemesisSeed(t *testing.T) uint64 {
	if s := os.Getenv("CHATD_NEMESIS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "CHATD_NEMESIS_SEED")
		return v
	}
	return uint64(time.Now().UnixNano())
}

func nemesisDuration(t *testing.T) time.Duration {
	if s := os.Getenv("CHATD_NEMESIS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "CHATD_NEMESIS_DURATION")
		return d
	}
	return 45 * time.Second
}

// nemFault is one step of the schedule.
type nemFault struct {
	kind string
	node int           // node-term, node-kill
	d    time.Duration // pause, stall, latency: how long; latency: the delay too
	lag  time.Duration // latency per chunk
	gap  time.Duration // traffic only, after the fault
}

func (f nemFault) String() string {
	switch f.kind {
	case "node-term", "node-kill":
		return fmt.Sprintf("%s n%d, then %s", f.kind, f.node+1, f.gap)
	case "proxy-latency":
		return fmt.Sprintf("%s %s for %s, then %s", f.kind, f.lag, f.d, f.gap)
	case "redis-kill", "proxy-cut":
		return fmt.Sprintf("%s, then %s", f.kind, f.gap)
	}
	return fmt.Sprintf("%s %s, then %s", f.kind, f.d, f.gap)
}

// schedule draws faults until their time reaches d: every kind once, in a
// random order, then random kinds.
func schedule(rng *rand.Rand, d time.Duration) []nemFault {
	kinds := []string{"redis-pause", "redis-kill", "node-term", "node-kill", "proxy-latency", "proxy-stall", "proxy-cut"}
	var out []nemFault
	var total time.Duration
	order := rng.Perm(len(kinds))
	for i := 0; total < d || i < len(kinds); i++ {
		k := kinds[rng.IntN(len(kinds))]
		if i < len(kinds) {
			k = kinds[order[i]]
		}
		f := nemFault{kind: k, gap: time.Duration(2000+rng.IntN(3000)) * time.Millisecond}
		switch k {
		case "redis-pause":
			f.d = time.Duration(500+rng.IntN(3500)) * time.Millisecond
		case "node-term", "node-kill":
			f.node = rng.IntN(3)
			f.d = 3 * time.Second // about what a restart takes
		case "proxy-latency":
			f.lag = time.Duration(20+rng.IntN(280)) * time.Millisecond
			f.d = time.Duration(1000+rng.IntN(3000)) * time.Millisecond
		case "proxy-stall":
			f.d = time.Duration(500+rng.IntN(3000)) * time.Millisecond
		case "redis-kill":
			f.d = 2 * time.Second
		}
		out = append(out, f)
		total += f.d + f.gap
	}
	return out
}

func TestNemesisKeepsEveryAckedWriteExactlyOnce(t *testing.T) {
	skipShort(t)
	seed := nemesisSeed(t)
	dur := nemesisDuration(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	plan := schedule(rng, dur)
	t.Logf("nemesis seed %d (CHATD_NEMESIS_SEED=%d replays), %s of faults:", seed, seed, dur)
	for i, f := range plan {
		t.Logf("  %2d. %s", i+1, f)
	}

	c := chatdtest.Start(t, chatdtest.Options{Nodes: 3, ShutdownGrace: 3 * time.Second})
	// n3 reaches Redis through the proxy
	proxy := startProxy(t, c.Redis.Addrs[0])
	c.Nodes[2].Args = []string{"--redis", "redis://" + proxy.addr() + "/0"}
	c.Nodes[2].Restart()
	n := &nemesis{t: t, c: c, adm: sdkAdmin(t, c), proxy: proxy, rng: rng, counts: map[string]int{}, peakRSS: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
	defer cancel()
	urls := func(i int) []string { // start at node i, then the others
		u := c.URLs()
		return append(u[i%3:], u[:i%3]...)
	}

	// Actors, made here (they may fail the test) and run by workers.
	var talkers []*sdkMember
	for i := range nemTalkers {
		talkers = append(talkers, connectMember(ctx, t, sdkUser(ctx, t, urls(i), fmt.Sprintf("talker%d", i))))
	}
	for i := range 3 {
		n.listeners = append(n.listeners, connectMember(ctx, t, sdkUser(ctx, t, urls(i+1), fmt.Sprintf("listener%d", i))))
	}
	poster := sdkUser(ctx, t, urls(2), "poster")
	scorer := sdkUser(ctx, t, urls(1), "scorer")
	churner := sdkUser(ctx, t, urls(0), "churner")
	churnConn := connectMember(ctx, t, churner.WithToken(churner.Token()))
	for i := range 2 {
		n.shoppers = append(n.shoppers, sdkUser(ctx, t, urls(i), fmt.Sprintf("shopper%d", i)))
	}
	for _, m := range append(slices.Clone(talkers), n.listeners...) {
		_, err := m.conn.Join(ctx, nemLobby)
		require.NoError(t, err)
	}
	n.startEpoch(ctx)

	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(wctx) }()
	}
	for i, m := range talkers {
		run(func(ctx context.Context) { n.talk(ctx, m, i) })
	}
	for _, m := range n.listeners {
		run(func(ctx context.Context) { n.listen(ctx, m) })
	}
	run(func(ctx context.Context) { n.post(ctx, poster) })
	run(func(ctx context.Context) { n.poll(ctx, poster) })
	run(func(ctx context.Context) { n.score(ctx, scorer) })
	run(func(ctx context.Context) { n.churn(ctx, churner, churnConn) })
	for i, s := range n.shoppers {
		run(func(ctx context.Context) { n.shop(ctx, s, i) })
	}

	n.settle(3 * time.Second)
	for i, f := range plan {
		t.Logf("fault %d: %s", i+1, f)
		n.inject(ctx, f)
		n.settle(f.gap)
	}
	stop()
	wg.Wait()
	n.checkEpoch(ctx, "the end")

	n.mu.Lock()
	defer n.mu.Unlock()
	var counts []string
	for k, v := range n.counts {
		counts = append(counts, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(counts)
	t.Logf("nemesis seed %d: %d faults, %d epochs; operations: %s", seed, len(plan), n.epoch.Load()+1, strings.Join(counts, ", "))
	var rss []string
	for _, node := range c.Nodes {
		rss = append(rss, fmt.Sprintf("%s %.1f MiB", node.ID, float64(n.peakRSS[node.ID])/1024))
		if n.peakRSS[node.ID] > nemesisRSSBoundMiB<<10 {
			n.violations = append(n.violations, fmt.Sprintf("%s: peak RSS %d KiB over the bound of %d MiB", node.ID, n.peakRSS[node.ID], nemesisRSSBoundMiB))
		}
	}
	t.Logf("peak RSS: %s (bound %d MiB); %d violations", strings.Join(rss, ", "), nemesisRSSBoundMiB, len(n.violations))
	for _, v := range n.violations {
		t.Error(v)
	}
}

// settle lets traffic run for d, sampling the nodes' memory.
func (n *nemesis) settle(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		n.sampleRSS()
	}
}

func (n *nemesis) sampleRSS() {
	for _, node := range n.c.Nodes {
		if !node.Running() {
			continue
		}
		if kb, err := rssKB(node.PID()); err == nil {
			n.mu.Lock()
			n.peakRSS[node.ID] = max(n.peakRSS[node.ID], kb)
			n.mu.Unlock()
		}
	}
}

// inject runs one fault and waits until every node is ready again.
func (n *nemesis) inject(ctx context.Context, f nemFault) {
	t, c := n.t, n.c
	switch f.kind {
	case "redis-pause":
		c.Redis.Server.Pause(t)
		n.settle(f.d)
		c.Redis.Server.Resume(t)
	case "redis-kill":
		n.checkEpoch(ctx, fmt.Sprintf("epoch %d, before Redis is killed", n.epoch.Load()))
		n.epoch.Add(1)
		c.Redis.Server.Kill(t)
		n.settle(500 * time.Millisecond)
		c.Redis.Server.Start(t)
		n.waitReady(ctx)
		n.startEpoch(ctx)
	case "node-term":
		c.Nodes[f.node].Restart()
	case "node-kill":
		c.Nodes[f.node].Kill()
		n.settle(300 * time.Millisecond)
		c.Nodes[f.node].Start()
	case "proxy-latency":
		n.proxy.setDelay(f.lag)
		n.settle(f.d)
		n.proxy.setDelay(0)
	case "proxy-stall":
		n.proxy.stall()
		n.settle(f.d)
		n.proxy.unstall()
	case "proxy-cut":
		t.Logf("cut %d connections between n3 and Redis", n.proxy.cut())
	}
	n.waitReady(ctx)
}

func (n *nemesis) waitReady(ctx context.Context) {
	for _, node := range n.c.Nodes {
		deadline := time.Now().Add(60 * time.Second)
		for !node.Healthy(ctx) {
			if time.Now().After(deadline) {
				n.t.Fatalf("%s not ready within 60 s", node.ID)
			}
			n.settle(100 * time.Millisecond)
		}
	}
}

// startEpoch stocks the shop and grants the shoppers their coins on a
// fresh Redis (the start, or after a loss).
func (n *nemesis) startEpoch(ctx context.Context) {
	t := n.t
	gen := n.epoch.Load()
	require.Eventually(t, func() bool {
		return n.adm.StockItem(ctx, client.Item{Item: nemItem, Stock: 1_000_000, Price: nemPrice}) == nil
	}, 60*time.Second, 200*time.Millisecond, "stock the shop")
	for _, s := range n.shoppers {
		require.Eventually(t, func() bool {
			w, err := s.Wallet(ctx)
			if err != nil {
				return false
			}
			if w.Balance == nemGrant {
				return true // an earlier grant whose answer was lost
			}
			_, err = n.adm.Grant(ctx, s.User(), nemGrant)
			return err == nil
		}, 60*time.Second, 200*time.Millisecond, "grant %s", s.User())
	}
	n.shopGen.Store(gen)
}

// pause sleeps d or until ctx ends.
func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// join joins lobby through m's Conn, retrying until it is in.
func join(ctx context.Context, conn *client.Conn, lobby string) string {
	for ctx.Err() == nil {
		jctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		r, err := conn.Join(jctx, lobby)
		cancel()
		if err == nil {
			return r.ID
		}
		pause(ctx, 300*time.Millisecond)
	}
	return ""
}

func (n *nemesis) talk(ctx context.Context, m *sdkMember, i int) {
	room := join(ctx, m.conn, nemLobby)
	gen := n.epoch.Load()
	for k := 0; pause(ctx, time.Duration(250+rand.IntN(250))*time.Millisecond); k++ {
		if g := n.epoch.Load(); g != gen { // Redis lost the seats: join again
			gen, room = g, join(ctx, m.conn, nemLobby)
		}
		op := nemOp{kind: "say", who: m.user, text: fmt.Sprintf("say-%d-%d", i, k), g0: n.epoch.Load()}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		op.id, op.err = m.conn.Say(sctx, room, op.text)
		cancel()
		op.g1 = n.epoch.Load()
		if ctx.Err() != nil && op.err != nil {
			op.g1 = -1 // the run ended: unknown
		}
		n.record(op)
		if op.err != nil {
			room = join(ctx, m.conn, nemLobby)
		}
	}
}

func (n *nemesis) listen(ctx context.Context, m *sdkMember) {
	gen := n.epoch.Load()
	for pause(ctx, 200*time.Millisecond) {
		m.mu.Lock()
		lost := len(m.lost) > 0
		m.lost = nil
		m.mu.Unlock()
		if g := n.epoch.Load(); g != gen || lost {
			gen = g
			join(ctx, m.conn, nemLobby)
			n.count("listener rejoins")
		}
	}
}

func (n *nemesis) post(ctx context.Context, cl *client.Client) {
	room, gen := "", int64(-1)
	for k := 0; pause(ctx, time.Duration(300+rand.IntN(400))*time.Millisecond); k++ {
		if g := n.epoch.Load(); g != gen || room == "" {
			r, err := cl.Join(ctx, nemLobby)
			if err != nil {
				continue
			}
			gen, room = g, r.ID
		}
		op := nemOp{kind: "post", who: cl.User(), text: fmt.Sprintf("post-%d", k), g0: n.epoch.Load()}
		m, err := cl.Post(ctx, room, op.text)
		op.id, op.err, op.g1 = m.ID, err, n.epoch.Load()
		if ctx.Err() != nil && err != nil {
			op.g1 = -1
		}
		n.record(op)
		if err != nil {
			room = ""
		}
	}
}

func (n *nemesis) poll(ctx context.Context, cl *client.Client) {
	err := cl.Poll(ctx, client.PollOptions{Wait: 5 * time.Second, OnError: func(error, time.Duration) { n.count("poll errors") }},
		func(context.Context, *client.PollResult) error { n.count("polls answered"); return nil })
	if err != nil && !errors.Is(err, context.Canceled) {
		n.violate("the poll loop ended: %v", err)
	}
}

func (n *nemesis) score(ctx context.Context, cl *client.Client) {
	for k := 0; pause(ctx, time.Duration(200+rand.IntN(300))*time.Millisecond); k++ {
		op := nemOp{kind: "incr", who: cl.User(), g0: n.epoch.Load()}
		e, err := cl.PostScore(ctx, nemBoard, client.Score{Player: nemPlayer, Score: 1, Mode: client.ScoreIncr},
			client.WithIdempotencyKey(fmt.Sprintf("incr-%d-%d", op.g0, k)))
		op.score, op.err, op.g1 = e.Score, err, n.epoch.Load()
		if ctx.Err() != nil && err != nil {
			op.g1 = -1
		}
		n.record(op)
	}
}

func (n *nemesis) churn(ctx context.Context, cl *client.Client, m *sdkMember) {
	for pause(ctx, time.Duration(200+rand.IntN(300))*time.Millisecond) {
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { // the same user joins over REST and WebSocket at once
			defer wg.Done()
			if _, err := cl.Join(ctx, nemChurn); err == nil {
				n.count("churn joins")
			}
		}()
		go func() {
			defer wg.Done()
			jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := m.conn.Join(jctx, nemChurn); err == nil {
				n.count("churn joins")
			}
		}()
		wg.Wait()
		if !pause(ctx, 100*time.Millisecond) {
			return
		}
		rooms, err := cl.Rooms(ctx, nemChurn)
		if err == nil {
			n.checkSeats(nemChurn, rooms)
		}
		for _, r := range rooms {
			if err := cl.Leave(ctx, r.ID); err == nil {
				n.count("churn leaves")
			}
		}
	}
}

func (n *nemesis) shop(ctx context.Context, cl *client.Client, i int) {
	for pause(ctx, time.Duration(150+rand.IntN(200))*time.Millisecond) {
		gen := n.epoch.Load()
		if n.shopGen.Load() != gen {
			continue // the coins of this epoch are not granted yet
		}
		op := nemOp{kind: "buy", who: cl.User(), g0: gen}
		_, op.err = cl.Buy(ctx, nemItem, 1)
		op.g1 = n.epoch.Load()
		if ctx.Err() != nil && op.err != nil {
			op.g1 = -1
		}
		if errors.Is(op.err, client.ErrInsufficientFunds) {
			n.count("buy refused: no coins")
			continue
		}
		n.record(op)
	}
}

// checkSeats reports a user seated twice in a lobby's rooms.
func (n *nemesis) checkSeats(lobby string, rooms []client.Room) {
	seen := map[string]string{}
	for _, r := range rooms {
		for _, u := range r.Members {
			if prev, ok := seen[u]; ok {
				n.violate("%s holds two seats in lobby %s: %s and %s", u, lobby, prev, r.ID)
			}
			seen[u] = r.ID
		}
	}
}

// history returns the latest 1,000 messages of room (the history's cap),
// oldest first, and whether it may have been trimmed (it holds 1,000).
func (n *nemesis) history(ctx context.Context, room string) ([]client.Message, bool, error) {
	h, err := n.adm.History(ctx, room, client.HistoryOptions{Limit: 1000})
	return h, len(h) == 1000, err
}

// checkEpoch checks the invariants of the current epoch: the histories,
// the listeners, the seats, the wallets and the board.
func (n *nemesis) checkEpoch(ctx context.Context, when string) {
	t := n.t
	gen := n.epoch.Load()
	t.Logf("checking %s", when)
	cl := n.adm
	before := n.seq.Load() // writes acked before this point must be stored

	var rooms []client.Room
	require.Eventually(t, func() bool {
		var err error
		rooms, err = cl.Rooms(ctx, nemLobby)
		return err == nil
	}, 60*time.Second, 200*time.Millisecond, "list the rooms")
	n.checkSeats(nemLobby, rooms)
	hist := map[string][]client.Message{}
	byID := map[string]string{} // id → room
	oldest := ""                // the oldest id of a trimmed history
	for _, r := range rooms {
		var h []client.Message
		var trimmed bool
		var err error
		require.Eventually(t, func() bool {
			h, trimmed, err = n.history(ctx, r.ID)
			return err == nil
		}, 60*time.Second, 200*time.Millisecond, "history of %s: %v", r.ID, err)
		hist[r.ID] = h
		if trimmed {
			oldest = max(oldest, h[0].ID)
		}
		texts := map[string]int{}
		for _, m := range h {
			texts[m.Text]++
			byID[m.ID] = r.ID
			if texts[m.Text] == 2 {
				n.violate("%s: %q stored twice in %s", when, m.Text, r.ID)
			}
		}
	}
	// every acked say and post of the epoch, acked before the snapshot
	stored := 0
	for _, kind := range []string{"say", "post"} {
		acked, _ := n.opsOf(kind, gen)
		for _, op := range acked {
			if op.seq > before || op.id < oldest {
				continue // acked after the snapshot, or trimmed since
			}
			room, ok := byID[op.id]
			if !ok {
				n.violate("%s: acked %s %q (id %s, by %s) is not in the history", when, op.kind, op.text, op.id, op.who)
				continue
			}
			stored++
			for _, m := range hist[room] {
				if m.ID == op.id && m.Text != op.text {
					n.violate("%s: acked id %s is %q, not %q", when, op.id, m.Text, op.text)
				}
			}
		}
	}
	t.Logf("%s: %d acked messages of epoch %d found in the history, once each", when, stored, gen)

	// every listener got its room's messages from its first of the epoch on
	for _, m := range n.listeners {
		for room, h := range hist {
			if len(h) == 0 {
				continue
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				missing, dup := listenerGaps(m.messages(room), h)
				if len(missing) == 0 || time.Now().After(deadline) {
					if len(missing) > 0 {
						n.violate("%s: %s missed %d messages of %s, e.g. %s", when, m.user, len(missing), room, missing[0])
					}
					if dup != "" {
						n.violate("%s: %s got %s twice", when, m.user, dup)
					}
					break
				}
				n.settle(200 * time.Millisecond)
			}
			got := m.messages(room)
			if !slices.IsSortedFunc(got, func(a, b client.Message) int { return compareStrings(a.ID, b.ID) }) {
				n.violate("%s: %s got %s's messages out of order", when, m.user, room)
			}
		}
	}

	// coins and purchases
	for _, s := range n.shoppers {
		ackedBefore, _ := n.opsOf("buy", gen)
		var w client.Wallet
		require.Eventually(t, func() bool {
			var err error
			w, err = s.Wallet(ctx)
			return err == nil
		}, 60*time.Second, 200*time.Millisecond)
		acked, unknown := n.opsOf("buy", gen)
		lo, hi := countBy(ackedBefore, s.User()), countBy(acked, s.User())+countBy(unknown, s.User())+1
		items := w.Items[nemItem]
		if w.Balance+nemPrice*items != nemGrant {
			n.violate("%s: %s's coins are not conserved: balance %d + %d × %d items != %d granted", when, s.User(), w.Balance, nemPrice, items, nemGrant)
		}
		if items < int64(lo) || items > int64(hi) {
			n.violate("%s: %s holds %d items; acked purchases %d, at most %d with the unknown ones", when, s.User(), items, lo, hi)
		}
	}
	// increments
	{
		ackedBefore, _ := n.opsOf("incr", gen)
		var e client.Entry
		var err error
		require.Eventually(t, func() bool {
			e, err = cl.Player(ctx, nemBoard, nemPlayer)
			return err == nil || errors.Is(err, client.ErrUnknownPlayer)
		}, 60*time.Second, 200*time.Millisecond)
		acked, unknown := n.opsOf("incr", gen)
		lo, hi := len(ackedBefore), len(acked)+len(unknown)+1
		if e.Score < float64(lo) || e.Score > float64(hi) {
			n.violate("%s: the board holds %v increments; acked %d, at most %d with the unknown ones", when, e.Score, lo, hi)
		}
		answers := map[float64]bool{}
		for _, op := range acked {
			if answers[op.score] {
				n.violate("%s: two acked increments answered the score %v", when, op.score)
			}
			answers[op.score] = true
		}
		t.Logf("%s: board at %v after %d acked and %d unknown increments", when, e.Score, len(acked), len(unknown))
	}
}

func countBy(ops []nemOp, who string) int {
	k := 0
	for _, op := range ops {
		if op.who == who {
			k++
		}
	}
	return k
}

// listenerGaps returns the messages of h that got (a listener's messages
// of one room) lacks from the first of h it has on, and an id it holds
// twice.
func listenerGaps(got, h []client.Message) (missing []string, dup string) {
	have := map[string]int{}
	for _, m := range got {
		have[m.ID]++
		if have[m.ID] == 2 {
			dup = m.ID
		}
	}
	first := -1
	for i, m := range h {
		if have[m.ID] > 0 {
			first = i
			break
		}
	}
	if first < 0 {
		return nil, dup // nothing of this epoch's room yet: not a member of it
	}
	for _, m := range h[first:] {
		if have[m.ID] == 0 {
			missing = append(missing, m.ID+" "+strconv.Quote(m.Text))
		}
	}
	return missing, dup
}
