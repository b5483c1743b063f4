package deploy

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/chatdtest"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// Issue #33's acceptance from outside: tickets submitted over REST (the Go
// SDK) to three real chatd processes sharing one Redis, while the node
// that runs the queue's matcher is SIGKILLed and then the node that took
// the queue over is SIGSTOPped for longer than the lock's lease and
// continued. When every ticket has ended:
//
//   - every ticket ended matched or expired, never cancelled or lost, as
//     its users read it (GET …/tickets/{id}, from the ticket's user and
//     from a party's second member);
//   - no ticket is in two match records (read from Redis: a ticket's own
//     status names only one match), every match record's tickets report
//     that match, and every matched ticket's match has a record;
//   - each player is in exactly one match if its ticket matched and in
//     none if it expired, counted over every match's players, and the
//     player's poll reports that match (or the expiry) and no other;
//   - each match has min–max players, its tickets equal attributes, a
//     party's members together, and every ticket within the skill window
//     its oldest ticket (the seed) had reached when the match formed:
//     window + widen × (ended − the seed's created), both from the ticket
//     statuses. The pick runs a moment before the formation stamps
//     "ended", so this bound is the pick's window or a hair wider; the
//     widest window a ticket can reach (at its max wait) is checked too;
//   - a matched ticket waited less than max wait when chosen (its "ended"
//     may be a moment later), an expired one at least max wait;
//   - nothing is left in the queue: its pool, age index and user map are
//     empty, and its outbox too (every match and expiry was announced);
//   - matching resumed after the kill: match records with a newer fence
//     than the killed holder's (read before the kill) formed after it,
//     and no match record of an older fence was formed after one of a
//     newer fence (the paused holder formed nothing once it lost the
//     queue).
//
// The holder is found on /metrics: the node that reports
// chatd_matchmaking_matcher_holding{queue} 1 and whose
// chatd_matchmaking_matcher_ticks_total{queue} grows (the lock key holds a
// random token that names no node). Timings are logged, not asserted,
// beyond generous deadlines.
func TestMatchmakingThroughKillAndPause(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := chatdtest.Start(t, chatdtest.Options{Nodes: 3})
	runMatchmaking(t, c, mmRun{tickets: 1000, submitFor: 24 * time.Second})
}

// TestMatchmakingOnRedisClusterThroughKillAndPause is the same on a
// 3-master Redis Cluster (the queue's keys on one master, users' events on
// all of them), with fewer tickets.
func TestMatchmakingOnRedisClusterThroughKillAndPause(t *testing.T) {
	skipShort(t)
	t.Parallel()
	r := redistest.OwnCluster(t, redistest.ClusterOptions{})
	c := chatdtest.Start(t, chatdtest.Options{Nodes: 3, Redis: r})
	runMatchmaking(t, c, mmRun{tickets: 300, submitFor: 12 * time.Second})
}

// The queue of the tests: matches of 2–4 players, parties of up to 2.
const (
	mmQueue     = "mmq"
	mmMin       = 2
	mmMax       = 4
	mmWindow    = 40.0
	mmWiden     = 40.0
	mmMaxWait   = 12 * time.Second
	mmMaxParty  = 2
	mmLockLease = 5 * time.Second // matchmaking's default lease (chatd does not set it)
)

var mmQueueDef = fmt.Sprintf(`{%q:{"min":%d,"max":%d,"window":%g,"widen_per_second":%g,"max_wait_seconds":%d,"max_party":%d,"reserve_seconds":5}}`,
	mmQueue, mmMin, mmMax, mmWindow, mmWiden, int(mmMaxWait/time.Second), mmMaxParty)

type mmRun struct {
	tickets   int
	submitFor time.Duration
}

// mmTicket is one ticket of the run and what became of it.
type mmTicket struct {
	idx     int
	user    *client.Client
	partner *client.Client // the party's second member, or nil
	req     client.TicketRequest
	outlier bool // a skill no other ticket is near: it expires

	id       string
	unknown  int // submissions whose outcome was unknown (a node died under them)
	final    client.Ticket
	fromPart client.Ticket // the status as the partner reads it
}

func (tk *mmTicket) players() []string {
	p := []string{tk.user.User()}
	if tk.partner != nil {
		p = append(p, tk.partner.User())
	}
	return p
}

// mmRecord is a match record in Redis (chatd:{mm:QUEUE}:m:SEQ).
type mmRecord struct {
	seq     int64
	created int64
	fence   int64
	attrs   string
	tickets []mmRecordTicket
}

type mmRecordTicket struct {
	ID      string `json:"id"`
	User    string `json:"user"`
	Party   string `json:"party"`
	Skill   string `json:"skill"`
	Created string `json:"created"`
}

func runMatchmaking(t *testing.T, c *chatdtest.Cluster, run mmRun) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	ks := keyspace.New(c.Prefix)
	rdb := c.Redis.Client

	adm := sdkAdmin(t, c)
	_, err := adm.SetSetting(ctx, "limit.sessions_per_ip_per_minute", 0)
	require.NoError(t, err)
	_, err = adm.SetSetting(ctx, "matchmaking.queues", mmQueueDef)
	require.NoError(t, err)
	for _, n := range c.Nodes {
		waitQueueDefined(ctx, t, c, n)
	}

	// the tickets: random skills, 8% of them a party of two, two thirds
	// with a region, 4% outliers that nobody is near
	hc := &http.Client{Transport: func() *http.Transport {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 64
		return tr
	}()}
	urls := c.URLs()
	newUser := func(i int) *client.Client {
		order := []string{urls[i%3], urls[(i+1)%3], urls[(i+2)%3]}
		cl, err := client.New(client.Config{NodeURLs: order, HTTPClient: hc, RequestTimeout: 30 * time.Second,
			Backoff: client.Backoff{Min: 50 * time.Millisecond, Max: time.Second}})
		require.NoError(t, err)
		return cl
	}
	tickets := make([]*mmTicket, run.tickets)
	var clients []*client.Client
	for i := range tickets {
		tk := &mmTicket{idx: i, user: newUser(i)}
		tk.req.Skill = 1000 + math.Round(rng.Float64()*200000)/100 // 1000–3000
		if rng.IntN(25) == 0 {
			tk.outlier = true
			tk.req.Skill = 1e6 + float64(i)*1e4 // far beyond the widest window of any other
		}
		switch rng.IntN(3) {
		case 0:
			tk.req.Attributes = map[string]string{"region": "eu"}
		case 1:
			tk.req.Attributes = map[string]string{"region": "us"}
		}
		clients = append(clients, tk.user)
		if !tk.outlier && rng.IntN(100) < 8 {
			tk.partner = newUser(i + 1)
			clients = append(clients, tk.partner)
		}
		tickets[i] = tk
	}
	signInAll(ctx, t, clients)
	for _, tk := range tickets {
		if tk.partner != nil {
			tk.req.Party = []string{tk.partner.User()}
		}
	}
	parties := 0
	for _, tk := range tickets {
		if tk.partner != nil {
			parties++
		}
	}
	t.Logf("%d tickets (%d parties of two), %d users, on %d nodes", len(tickets), parties, len(clients), len(c.Nodes))

	// submit at a steady pace over run.submitFor; the faults run meanwhile
	var submitted atomic.Int64
	var subErrs sync.Map // idx → error
	subDone := make(chan struct{})
	defer func() { cancel(); <-subDone }() // a failed test stops the submissions first
	start := time.Now()
	go func() {
		defer close(subDone)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		every := run.submitFor / time.Duration(len(tickets))
		for i, tk := range tickets {
			if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
				time.Sleep(d)
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := submitTicket(ctx, tk); err != nil {
					subErrs.Store(tk.idx, err)
				}
				submitted.Add(1)
			}()
		}
		wg.Wait()
	}()

	// the kill: the holder, once a third of the tickets are in
	waitUntil(t, 2*time.Minute, "a third of the tickets submitted", func() bool { return submitted.Load() >= int64(len(tickets)/3) })
	holder := waitHolder(ctx, t, c, nil)
	fenceKey := ks.Key("mm", mmQueue, "fence")
	killedFence, err := rdb.Get(ctx, fenceKey).Int64()
	require.NoError(t, err)
	killed := c.Nodes[holder]
	killed.Kill()
	killedAt := time.Now()
	t.Logf("%.1fs: SIGKILL %s, the holder (fence %d), after %d submissions", time.Since(start).Seconds(), killed.ID, killedFence, submitted.Load())
	next := waitHolder(ctx, t, c, []int{holder})
	t.Logf("%.1fs: %s holds the queue, %.1fs after the kill", time.Since(start).Seconds(), c.Nodes[next].ID, time.Since(killedAt).Seconds())

	// the pause: the new holder, once it has formed a match, stopped for
	// longer than the lease
	waitUntil(t, time.Minute, c.Nodes[next].ID+" forms a match", func() bool {
		m, err := scrapeMM(ctx, c.Nodes[next])
		return err == nil && m.matches > 0
	})
	paused := c.Nodes[next]
	paused.Pause()
	pausedAt := time.Now()
	t.Logf("%.1fs: SIGSTOP %s, the holder, after %d submissions", time.Since(start).Seconds(), paused.ID, submitted.Load())
	third := waitHolder(ctx, t, c, []int{holder, next})
	t.Logf("%.1fs: %s holds the queue, %.1fs into the pause", time.Since(start).Seconds(), c.Nodes[third].ID, time.Since(pausedAt).Seconds())
	if d := time.Until(pausedAt.Add(mmLockLease + 3*time.Second)); d > 0 {
		time.Sleep(d)
	}
	paused.Resume()
	t.Logf("%.1fs: SIGCONT %s after %.1fs", time.Since(start).Seconds(), paused.ID, time.Since(pausedAt).Seconds())

	select {
	case <-subDone:
	case <-ctx.Done():
		t.Fatal("the submissions did not end")
	}
	t.Logf("%.1fs: every ticket submitted", time.Since(start).Seconds())
	subErrs.Range(func(k, v any) bool {
		t.Errorf("ticket %d: submit: %v", k, v)
		return true
	})
	if t.Failed() {
		t.FailNow()
	}

	// every ticket ends: matched or expired within its max wait, plus the
	// matcher's delays (a dead and a paused holder)
	pending := slices.Clone(tickets)
	deadline := time.Now().Add(mmMaxWait + 90*time.Second)
	for len(pending) > 0 {
		var still []*mmTicket
		for _, tk := range pending {
			st, err := tk.user.Ticket(ctx, mmQueue, tk.id)
			if err != nil || st.State == "waiting" {
				still = append(still, tk)
				continue
			}
			tk.final = st
		}
		pending = still
		if len(pending) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d tickets still waiting (or unreadable), e.g. %s of %s", len(pending), pending[0].id, pending[0].user.User())
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Logf("%.1fs: every ticket ended", time.Since(start).Seconds())
	for _, tk := range tickets {
		if tk.partner != nil {
			st, err := tk.partner.Ticket(ctx, mmQueue, tk.id)
			require.NoError(t, err, "the partner reads ticket %s", tk.id)
			tk.fromPart = st
		}
	}

	// nothing is left behind: no entry in the pool or the age index, no
	// user held by an open ticket, nothing formed that was not announced
	waitUntil(t, time.Minute, "the queue's pool, age index, user map and outbox empty", func() bool {
		pipe := rdb.Pipeline()
		pool := pipe.ZCard(ctx, ks.Key("mm", mmQueue, "pool"))
		age := pipe.ZCard(ctx, ks.Key("mm", mmQueue, "age"))
		users := pipe.HLen(ctx, ks.Key("mm", mmQueue, "users"))
		outbox := pipe.ZCard(ctx, ks.Key("mm", mmQueue, "outbox"))
		if _, err := pipe.Exec(ctx); err != nil {
			return false
		}
		return pool.Val() == 0 && age.Val() == 0 && users.Val() == 0 && outbox.Val() == 0
	})

	records := readMatchRecords(ctx, t, rdb, ks)
	checkMatches(t, tickets, records, killedFence, killedAt)
	checkPolls(ctx, t, tickets)

	for _, n := range c.Nodes {
		if n == killed {
			continue
		}
		if m, err := scrapeMM(ctx, n); err == nil {
			t.Logf("%s: matches %v, fence rejections %v, holding %v", n.ID, m.matches, m.fenceRejected, m.holding)
		}
	}
}

// signInAll signs every client in, each as a new guest of its own.
func signInAll(ctx context.Context, t *testing.T, cls []*client.Client) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	errs := make([]error, len(cls))
	for i, cl := range cls {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			name := fmt.Sprintf("mm%04d", i)
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				if errs[i] = cl.SignIn(ctx, name); errs[i] == nil || time.Now().After(deadline) {
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "sign in %d", i)
	}
}

var openTicketRe = regexp.MustCompile(`\(([A-Z2-7]{26})\)`)

// submitTicket submits tk, its partner polling first (a party member must
// be online). A submission whose outcome is unknown (the node died under
// it) is sent again: ticket_open then names the ticket it made.
func submitTicket(ctx context.Context, tk *mmTicket) error {
	if tk.partner != nil {
		return submitParty(ctx, tk)
	}
	for attempt := 0; ; attempt++ {
		if tk.partner != nil {
			if _, err := tk.partner.PollOnce(ctx, 0); err != nil && attempt < 20 {
				time.Sleep(200 * time.Millisecond)
				continue
			}
		}
		st, err := tk.user.SubmitTicket(ctx, mmQueue, tk.req)
		if err == nil {
			// the answer is the ticket as read just after the submission:
			// a match may have formed in between
			if (st.State != "waiting" && st.State != "matched") || st.ID == "" {
				return fmt.Errorf("submitted as %+v", st)
			}
			tk.id = st.ID
			return nil
		}
		var ce *client.Error
		switch {
		case errcode.Is(err, errcode.TicketOpen) && tk.unknown > 0:
			m := openTicketRe.FindStringSubmatch(ce2msg(err))
			if m == nil {
				return fmt.Errorf("ticket_open without a ticket id: %w", err)
			}
			tk.id = m[1]
			return nil
		// 408: the node was stopped (SIGSTOP) while the request waited in its
		// socket, and on waking found the request's read deadline passed: the
		// request was never handled; it is sent again like a 5xx.
		case errors.As(err, &ce) && !(ce.Status >= 500 || ce.Status == 408 || errors.Is(err, client.ErrConflict)):
			return err // a refusal: a bug of the test or the server
		case attempt >= 20 || ctx.Err() != nil:
			return err
		}
		if !errors.As(err, &ce) || ce.Status >= 500 || ce.Status == 408 {
			tk.unknown++ // a transport error or a 5xx: the submission may have been applied
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func ce2msg(err error) string {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Message
	}
	return err.Error()
}

// waitQueueDefined waits until n's admin read of the queues lists mmQueue
// (the setting reached it).
func waitQueueDefined(ctx context.Context, t *testing.T, c *chatdtest.Cluster, n *chatdtest.Node) {
	t.Helper()
	waitUntil(t, 30*time.Second, n.ID+" defines queue "+mmQueue, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/api/v1/matchmaking/queues", nil)
		req.Header.Set("Authorization", "Bearer "+c.AdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct {
			Queues []struct {
				Queue string `json:"queue"`
			} `json:"queues"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
			return false
		}
		return slices.ContainsFunc(out.Queues, func(q struct {
			Queue string `json:"queue"`
		}) bool {
			return q.Queue == mmQueue
		})
	})
}

func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
	}
}

// mmMetrics are a node's matchmaking metrics of mmQueue.
type mmMetrics struct {
	holding       bool
	ticks         float64
	matches       float64
	fenceRejected float64
}

// scrapeMM reads n's /metrics.
func scrapeMM(ctx context.Context, n *chatdtest.Node) (mmMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return mmMetrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return mmMetrics{}, fmt.Errorf("/metrics: %d", resp.StatusCode)
	}
	var m mmMetrics
	label := `{queue="` + mmQueue + `"} `
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), label)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			continue
		}
		switch name {
		case "chatd_matchmaking_matcher_holding":
			m.holding = v == 1
		case "chatd_matchmaking_matcher_ticks_total":
			m.ticks = v
		case "chatd_matchmaking_matches_total":
			m.matches = v
		case "chatd_matchmaking_fence_rejected_total":
			m.fenceRejected = v
		}
	}
	return m, sc.Err()
}

// waitHolder returns the index of the node that runs mmQueue's matcher,
// among the nodes not in skip: the one node that reports holding the
// queue, whose rounds go on (its ticks grow between two scrapes).
func waitHolder(ctx context.Context, t *testing.T, c *chatdtest.Cluster, skip []int) int {
	t.Helper()
	var found int
	waitUntil(t, time.Minute, "one node holds the queue and runs its rounds", func() bool {
		holders := map[int]float64{}
		for i, n := range c.Nodes {
			if slices.Contains(skip, i) {
				continue
			}
			m, err := scrapeMM(ctx, n)
			if err == nil && m.holding {
				holders[i] = m.ticks
			}
		}
		if len(holders) != 1 {
			return false
		}
		for i, ticks := range holders {
			time.Sleep(600 * time.Millisecond) // three rounds at the default tick
			m, err := scrapeMM(ctx, c.Nodes[i])
			if err != nil || !m.holding || m.ticks <= ticks {
				return false
			}
			found = i
		}
		return true
	})
	return found
}

// readMatchRecords reads every match record of mmQueue from Redis: the
// numbers 1 to the counter (a number reserved by a pick that formed
// nothing has no record).
func readMatchRecords(ctx context.Context, t *testing.T, rdb redis.UniversalClient, ks keyspace.Space) []mmRecord {
	t.Helper()
	top, err := rdb.Get(ctx, ks.Key("mm", mmQueue, "seq")).Int64()
	require.NoError(t, err, "the match counter")
	var out []mmRecord
	for seq := int64(1); seq <= top; seq++ {
		h, err := rdb.HGetAll(ctx, ks.Key("mm", mmQueue, "m", strconv.FormatInt(seq, 10))).Result()
		require.NoError(t, err)
		if len(h) == 0 {
			continue
		}
		r := mmRecord{seq: seq, attrs: h["attrs"]}
		r.created, err = strconv.ParseInt(h["created"], 10, 64)
		require.NoError(t, err, "match %d: created", seq)
		r.fence, err = strconv.ParseInt(h["fence"], 10, 64)
		require.NoError(t, err, "match %d: fence", seq)
		require.NoError(t, json.Unmarshal([]byte(h["players"]), &r.tickets), "match %d: players %s", seq, h["players"])
		out = append(out, r)
	}
	return out
}

// checkMatches checks what every ticket's status and every match record
// say (see TestMatchmakingThroughKillAndPause).
func checkMatches(t *testing.T, tickets []*mmTicket, records []mmRecord, killedFence int64, killedAt time.Time) {
	byID := map[string]*mmTicket{}
	byMatch := map[string][]*mmTicket{}
	matchesOf := map[string][]string{} // player → matches
	matched, expired := 0, 0
	for _, tk := range tickets {
		require.NotEmpty(t, tk.id, "ticket %d has an id", tk.idx)
		require.Nil(t, byID[tk.id], "ticket id %s given twice", tk.id)
		byID[tk.id] = tk
		st := tk.final
		assert.Equal(t, tk.id, st.ID)
		assert.Equal(t, tk.user.User(), st.User, "ticket %s: its user", tk.id)
		switch st.State {
		case "matched":
			matched++
			assert.NotEmpty(t, st.Match, "ticket %s: matched, with its match", tk.id)
			assert.NotEmpty(t, st.Room, "ticket %s: matched, with its room", tk.id)
			// the pick takes only tickets younger than max wait; "ended" is
			// stamped by the formation a moment later (within the lease, or
			// the holder would have been fenced out)
			assert.Less(t, st.Ended-st.Created, (mmMaxWait + mmLockLease).Milliseconds(), "ticket %s matched before its max wait", tk.id)
			byMatch[st.Match] = append(byMatch[st.Match], tk)
			for _, p := range tk.players() {
				matchesOf[p] = append(matchesOf[p], st.Match)
			}
		case "expired":
			expired++
			assert.GreaterOrEqual(t, st.Ended-st.Created, mmMaxWait.Milliseconds(), "ticket %s expired after its max wait", tk.id)
			assert.Empty(t, st.Match, "ticket %s: expired, in no match", tk.id)
		default:
			t.Errorf("ticket %s of %s ended %q: neither matched nor expired", tk.id, tk.user.User(), st.State)
		}
		if tk.partner != nil {
			assert.Equal(t, st.State, tk.fromPart.State, "ticket %s: the partner reads the same state", tk.id)
			assert.Equal(t, st.Match, tk.fromPart.Match, "ticket %s: the partner reads the same match", tk.id)
		}
		if tk.outlier && st.State == "matched" {
			t.Errorf("outlier ticket %s (skill %g) matched %s", tk.id, tk.req.Skill, st.Match)
		}
	}
	unknown := 0
	for _, tk := range tickets {
		unknown += min(tk.unknown, 1)
	}
	t.Logf("%d tickets: %d matched in %d matches, %d expired; %d submissions of unknown outcome resolved by ticket_open",
		len(tickets), matched, len(byMatch), expired, unknown)
	assert.Equal(t, len(tickets), matched+expired, "every ticket matched or expired")
	assert.Greater(t, len(byMatch), len(tickets)/10, "matches formed")

	// each player of a matched ticket is in one match, of an expired one in none
	for _, tk := range tickets {
		for _, p := range tk.players() {
			if tk.final.State == "matched" {
				assert.Len(t, matchesOf[p], 1, "player %s: in one match", p)
			} else {
				assert.Empty(t, matchesOf[p], "player %s: in no match", p)
			}
		}
	}

	// every match as its tickets report it
	widest := mmWindow + mmWiden*mmMaxWait.Seconds()
	widened := 0
	for id, ts := range byMatch {
		players := 0
		var want []string
		for _, tk := range ts {
			players += len(tk.players())
			want = append(want, tk.players()...)
			assert.Equal(t, ts[0].req.Attributes, tk.req.Attributes, "match %s: equal attributes", id)
			assert.Equal(t, ts[0].final.Ended, tk.final.Ended, "match %s: its tickets ended together", id)
			assert.Equal(t, ts[0].final.Room, tk.final.Room, "match %s: one room", id)
		}
		assert.GreaterOrEqual(t, players, mmMin, "match %s: at least min players", id)
		assert.LessOrEqual(t, players, mmMax, "match %s: at most max players", id)
		for _, tk := range ts {
			assert.ElementsMatch(t, want, tk.final.Players, "match %s: the players as ticket %s reports them, parties together", id, tk.id)
		}
		// the seed is the oldest ticket (ties: any of the oldest)
		oldest := slices.MinFunc(ts, func(a, b *mmTicket) int { return cmp.Compare(a.final.Created, b.final.Created) }).final.Created
		ended := ts[0].final.Ended
		window := mmWindow + mmWiden*float64(max(ended-oldest, 0))/1000
		fits := false
		for _, s := range ts {
			if s.final.Created != oldest {
				continue
			}
			ok := true
			for _, tk := range ts {
				if math.Abs(tk.req.Skill-s.req.Skill) > window+1e-6 {
					ok = false
				}
			}
			fits = fits || ok
		}
		if !fits {
			var skills []string
			for _, tk := range ts {
				skills = append(skills, fmt.Sprintf("%s: skill %g created %d", tk.id, tk.req.Skill, tk.final.Created))
			}
			t.Errorf("match %s (ended %d): tickets outside the window %g of its oldest ticket: %s", id, ended, window, strings.Join(skills, "; "))
		}
		lo := slices.MinFunc(ts, func(a, b *mmTicket) int { return cmp.Compare(a.req.Skill, b.req.Skill) }).req.Skill
		hi := slices.MaxFunc(ts, func(a, b *mmTicket) int { return cmp.Compare(a.req.Skill, b.req.Skill) }).req.Skill
		assert.LessOrEqual(t, hi-lo, 2*widest, "match %s: skill spread within twice the widest window", id)
		if hi-lo > mmWindow*2 {
			widened++
		}
	}
	t.Logf("%d matches needed a widened window (spread over twice the initial window)", widened)

	// the records in Redis: one per match, no ticket in two
	inRecord := map[string]int64{}
	seen := map[string]bool{}
	for _, r := range records {
		id := mmQueue + "-" + strconv.FormatInt(r.seq, 10)
		seen[id] = true
		var got []string
		for _, rt := range r.tickets {
			if prev, ok := inRecord[rt.ID]; ok {
				t.Errorf("ticket %s is in match %d and match %d", rt.ID, prev, r.seq)
			}
			inRecord[rt.ID] = r.seq
			got = append(got, rt.ID)
			tk := byID[rt.ID]
			if !assert.NotNil(t, tk, "match %s holds ticket %s, not one of ours", id, rt.ID) {
				continue
			}
			assert.Equal(t, id, tk.final.Match, "ticket %s is in record %s", rt.ID, id)
			assert.Equal(t, tk.user.User(), rt.User, "match %s: ticket %s's user", id, rt.ID)
			assert.Equal(t, tk.final.Ended, r.created, "ticket %s ended when match %s formed", rt.ID, id)
		}
		var want []string
		for _, tk := range byMatch[id] {
			want = append(want, tk.id)
		}
		assert.ElementsMatch(t, want, got, "match %s: the record's tickets are those that report it", id)
	}
	for id := range byMatch {
		assert.True(t, seen[id], "match %s has a record", id)
	}

	// the fence: matching resumed after the kill under a newer fence, and
	// no holder formed after one with a newer fence had
	after := 0
	var resumed int64 = -1
	latest := map[int64]int64{} // fence → latest created
	earliest := map[int64]int64{}
	for _, r := range records {
		if r.fence > killedFence {
			after++
			if resumed < 0 || r.created < resumed {
				resumed = r.created
			}
		}
		latest[r.fence] = max(latest[r.fence], r.created)
		if e, ok := earliest[r.fence]; !ok || r.created < e {
			earliest[r.fence] = r.created
		}
	}
	require.Positive(t, after, "matches formed after the kill, by a newer holder")
	// a generous bound, not a timing: a new holder takes over within about
	// lease + lease/5, and tickets kept coming meanwhile
	assert.Less(t, resumed-killedAt.UnixMilli(), (6 * mmLockLease).Milliseconds(), "matching resumed after the kill")
	t.Logf("%d matches formed under a newer fence than the killed holder's; the first %.1fs after the kill (lease %s)",
		after, float64(resumed-killedAt.UnixMilli())/1000, mmLockLease)
	fences := slices.Sorted(maps.Keys(latest))
	t.Logf("fences of the match records: %v", fences)
	for i, f := range fences {
		for _, g := range fences[i+1:] {
			assert.LessOrEqual(t, latest[f], earliest[g], "no match of fence %d formed after one of fence %d", f, g)
		}
	}
}

// checkPolls has every player poll: its match section reports its
// ticket's match (or expiry), and no other match.
func checkPolls(ctx context.Context, t *testing.T, tickets []*mmTicket) {
	type poller struct {
		cl *client.Client
		tk *mmTicket
	}
	var ps []poller
	for _, tk := range tickets {
		ps = append(ps, poller{tk.user, tk})
		if tk.partner != nil {
			ps = append(ps, poller{tk.partner, tk})
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	dups := 0
	for _, p := range ps {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := p.cl.PollOnce(ctx, 0)
			if !assert.NoError(t, err, "%s polls", p.cl.User()) {
				return
			}
			matches := map[string]int{}
			expiries := 0
			for _, ev := range r.Match {
				switch ev.Type {
				case "matched":
					matches[ev.Match]++
				case "ticket_expired":
					if ev.Ticket == p.tk.id {
						expiries++
					}
				}
			}
			switch p.tk.final.State {
			case "matched":
				assert.Equal(t, []string{p.tk.final.Match}, slices.Collect(maps.Keys(matches)), "%s: told of its match and no other", p.cl.User())
				assert.Zero(t, expiries, "%s: its ticket matched, not expired", p.cl.User())
			case "expired":
				assert.Empty(t, matches, "%s: its ticket expired: no match", p.cl.User())
				assert.Equal(t, 1, expiries, "%s: told of the expiry", p.cl.User())
			}
			mu.Lock()
			for _, n := range matches {
				dups += n - 1
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d players polled; %d repeated match events", len(ps), dups)
}

// submitParty forms tk's party by consent (#40): the user invites the
// partner, who accepts; the ticket queues with the acceptance. Both poll
// first, to be online (a player not online dissolves the party at the
// acceptance). An invitation whose answer was lost is sent again (the
// first one lapses unanswered); an acceptance whose answer was lost is
// read back from the ticket; a party dissolved meanwhile (a player's
// presence lost in a node's kill or pause) is formed again.
func submitParty(ctx context.Context, tk *mmTicket) error {
	transient := func(err error, attempt int) bool {
		var ce *client.Error
		return attempt < 20 && ctx.Err() == nil && (!errors.As(err, &ce) || ce.Status >= 500 || ce.Status == 408)
	}
	for round := 0; ; round++ {
		var p client.Ticket
		for attempt := 0; ; attempt++ {
			_, err := tk.partner.PollOnce(ctx, 0)
			if err == nil {
				_, err = tk.user.PollOnce(ctx, 0)
			}
			if err == nil {
				p, err = tk.user.InviteParty(ctx, mmQueue, tk.req)
			}
			if err == nil {
				break
			}
			if !transient(err, attempt) && !(errors.Is(err, client.ErrConflict) && attempt < 20) {
				return fmt.Errorf("invite: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		for attempt := 0; ; attempt++ {
			st, err := tk.partner.AcceptParty(ctx, mmQueue, p.ID)
			if err == nil && (st.State == "waiting" || st.State == "matched") {
				tk.id = p.ID
				return nil
			}
			if err == nil {
				return fmt.Errorf("accepted as %+v", st)
			}
			if errcode.Is(err, errcode.Conflict) {
				st, serr := tk.user.Ticket(ctx, mmQueue, p.ID)
				if serr == nil && st.State != "pending" && st.State != "cancelled" {
					tk.id = p.ID // an earlier acceptance whose answer was lost
					return nil
				}
				if serr == nil && st.State == "cancelled" && round < 5 {
					break // dissolved: a player was not online; form it again
				}
			}
			if !transient(err, attempt) {
				return fmt.Errorf("accept: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
