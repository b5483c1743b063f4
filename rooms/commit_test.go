package rooms

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/redisx"
)

// commitNode is a simulated chatd node for the send commit tests: a
// Service on its own client and its own metrics registry, so that its
// waiting calls can be read.
type commitNode struct {
	s   *Service
	reg *prometheus.Registry
}

func commitNodes(t *testing.T, r *redistest.Redis, n int, opt *redis.Options) []commitNode {
	t.Helper()
	out := make([]commitNode, n)
	for i := range out {
		o := *opt
		o.Addr = r.Addrs[0]
		rdb := redis.NewClient(&o)
		t.Cleanup(func() { _ = rdb.Close() })
		reg := prometheus.NewRegistry()
		s, err := New(rdb, Config{Prefix: r.Prefix, Registerer: reg})
		require.NoError(t, err)
		require.NoError(t, s.Seats.Start(context.Background()))
		t.Cleanup(func() { assert.NoError(t, s.Seats.Close(context.Background())) })
		out[i] = commitNode{s, reg}
	}
	return out
}

// waiting returns the node's SendMany calls waiting for a commit
// (chatd_rooms_send_waiting_calls).
func (n commitNode) waiting(t *testing.T) int {
	mfs, err := n.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "chatd_rooms_send_waiting_calls" {
			return int(mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	return 0
}

// sendSeconds returns the node's SendMany calls that chatd_rooms_send_seconds
// timed, and how many of them took over a second.
func (n commitNode) sendSeconds(t *testing.T) (calls, slow uint64) {
	mfs, err := n.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "chatd_rooms_send_seconds" {
			h := mf.GetMetric()[0].GetHistogram()
			calls, slow = h.GetSampleCount(), h.GetSampleCount()
			for _, b := range h.GetBucket() {
				if b.GetUpperBound() <= 1 {
					slow = h.GetSampleCount() - b.GetCumulativeCount()
				}
			}
		}
	}
	return calls, slow
}

// evalshas returns the EVALSHA calls of INFO commandstats.
func evalshas(t *testing.T, r *redistest.Redis) int {
	t.Helper()
	return int(redistest.Calls(t, r.Client, "evalsha"))
}

// caller is one sender of the commit tests: a user seated in a room of
// lobby ca or cb, on one node, sending batches of keyed or unkeyed says.
type caller struct {
	node  int
	user  string
	room  string
	keyed bool
}

func (c caller) says(batch string, n int) []SendRequest {
	reqs := make([]SendRequest, n)
	for i := range reqs {
		reqs[i] = SendRequest{Room: c.room, User: c.user, Text: fmt.Sprintf("%s %s %d", c.user, batch, i)}
		if c.keyed {
			reqs[i].Key = fmt.Sprintf("s-%s:%s-%d", c.user, batch, i)
		}
	}
	return reqs
}

// seatCallers seats perNode users on each node, alternately in lobbies ca
// and cb: on node 0 every one sends keyed says, on node 1 none, on the
// others every other pair.
func seatCallers(t *testing.T, ns []commitNode, perNode int) []caller {
	t.Helper()
	ctx := context.Background()
	var cs []caller
	for n := range ns {
		for k := range perNode {
			lobby := []string{"ca", "cb"}[k%2]
			user := fmt.Sprintf("n%du%d", n, k)
			room, err := ns[n].s.Seats.Join(ctx, lobby, user, ws1)
			require.NoError(t, err)
			keyed := n == 0 || n > 1 && k%4 < 2
			cs = append(cs, caller{node: n, user: user, room: room.ID, keyed: keyed})
		}
	}
	return cs
}

// stallAndSend pauses the server, holds each node's committer before its
// next commit (holdFirstCommits), has every caller send its batch at once
// from its own goroutine (as the say workers of a node's connections do),
// waits until on each node every call waits, releases the committers then
// (the commits go out, to a server that does not answer), resumes the
// server after hold, and returns each caller's replies. Held, a node's first
// commit carries every call: a committer not held may take the first
// calls alone when they come before the others.
func stallAndSend(t *testing.T, r *redistest.Redis, ns []commitNode, cs []caller, batches [][]SendRequest,
	hold time.Duration) [][]SendReply {
	t.Helper()
	ctx := context.Background()
	perNode := map[int]int{}
	for _, c := range cs {
		perNode[c.node]++
	}
	release := holdFirstCommits(ns)
	r.Server.Pause(t)
	out := make([][]SendReply, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = ns[c.node].s.Messages.SendMany(ctx, batches[i], SendOptions{Rate: 100, Burst: 100})
		}()
	}
	for n := range ns {
		require.Eventually(t, func() bool { return ns[n].waiting(t) == perNode[n] },
			30*time.Second, time.Millisecond, "node %d: the calls wait for a commit", n)
	}
	release()
	time.Sleep(hold)
	r.Server.Resume(t)
	wg.Wait()
	return out
}

// holdFirstCommits holds each node's next committer before it takes the
// waiting calls, until release: its commit then carries every call that
// came meanwhile.
func holdFirstCommits(ns []commitNode) (release func()) {
	gates := make([]chan struct{}, len(ns))
	for n := range ns {
		gate := make(chan struct{})
		gates[n] = gate
		var once sync.Once
		ns[n].s.Messages.beforeCommit = func() { once.Do(func() { <-gate }) }
	}
	return func() {
		for _, g := range gates {
			close(g)
		}
	}
}

// TestSendCommitsTheSaysOfConcurrentCalls: the says of a node's concurrent
// SendMany calls (one per connection's say worker) share round trips and
// script calls. 3 nodes, 6 senders each in two lobbies, each sending one
// say at once while the committer of its node is held before its first
// commit: each node sends one commit for the six calls, a script per
// lobby (which claims the keys and counts the says too on a Redis that is
// not a Cluster), 2 EVALSHA per node for 6 says. Before the group commit
// each call was its own pipeline and each keyed say claimed its key in a
// script: 3 EVALSHA per keyed say, 2 per unkeyed one (45 for these 18
// says). Each say is answered with its message, stored once.
func TestSendCommitsTheSaysOfConcurrentCalls(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	ns := commitNodes(t, r, 3, &redis.Options{ReadTimeout: time.Minute, MaxRetries: -1})
	cs := seatCallers(t, ns, 6)
	for _, n := range ns { // the scripts are loaded, the histories made
		for _, c := range cs[:2] {
			_, err := n.s.Messages.Send(ctx, c.room, c.user, "warm-up", SendOptions{})
			require.NoError(t, err)
		}
	}
	batches := make([][]SendRequest, len(cs))
	for i, c := range cs {
		batches[i] = c.says("one", 1)
	}
	require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
	out := stallAndSend(t, r, ns, cs, batches, 0)
	calls := evalshas(t, r)
	t.Logf("EVALSHA for %d says from %d calls on %d nodes: %d", len(cs), len(cs), len(ns), calls)
	assert.Equal(t, 2*len(ns), calls, "per node: one commit, a script per lobby")
	for i, c := range cs {
		require.Len(t, out[i], 1)
		require.NoError(t, out[i][0].Err, c.user)
		assert.False(t, out[i][0].Duplicate)
		h, err := ns[0].s.Messages.History(ctx, c.room, "", MaxHistoryLimit)
		require.NoError(t, err)
		n := 0
		for _, m := range h {
			if m.Text == batches[i][0].Text {
				n++
				assert.Equal(t, out[i][0].Message.ID, m.ID)
			}
		}
		assert.Equal(t, 1, n, "%s's say stored once", c.user)
	}
}

// TestSendCommitSurvivesAClientRetry: one commit carrying the batches of
// 8 senders per node (3 nodes, two lobbies, keyed and unkeyed says, 5 says
// each) is held up past the client's read timeout, so go-redis sends the
// claims and the scripts again on a new connection and Redis runs both
// copies when it wakes. Every say is stored once, each sender's says in
// the order it sent them, each answered with its stored message (not as a
// duplicate); the same batches sent again are answered as duplicates
// (keyed) or stored as new says (unkeyed), still in order. The merged
// commit keeps what each call had alone.
func TestSendCommitSurvivesAClientRetry(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	ns := commitNodes(t, r, 3, &redis.Options{MaxRetries: 1, ReadTimeout: time.Second,
		MinRetryBackoff: 10 * time.Millisecond, MaxRetryBackoff: 10 * time.Millisecond})
	const perNode = 8
	cs := seatCallers(t, ns, perNode)
	for _, n := range ns {
		for _, c := range cs[:2] {
			_, err := n.s.Messages.Send(ctx, c.room, c.user, "warm-up", SendOptions{})
			require.NoError(t, err)
		}
	}
	batches := make([][]SendRequest, len(cs))
	for i, c := range cs {
		batches[i] = c.says("first", 5)
	}
	// Each node's commit carries all eight calls (stallAndSend), and the
	// server is paused past the read timeout while it is in flight.
	// One run of a node's commit is a script call per lobby (on a Redis
	// that is not a Cluster the scripts claim the keys and count the says
	// too): every node's scripts are held up and sent again.
	runs := scriptCalls(t, r.Server.Addr)
	out := stallAndSend(t, r, ns, cs, batches, 1500*time.Millisecond)
	assert.Greater(t, scriptCalls(t, r.Server.Addr)-runs, 3*len(ns), "Redis ran node 1's scripts twice")
	for n := range ns {
		calls, slow := ns[n].sendSeconds(t)
		assert.Equal(t, uint64(2+perNode), calls, "node %d: every call with says is timed, the warm-ups too", n)
		assert.Equal(t, uint64(perNode), slow, "node %d: the calls held up past the read timeout took over a second", n)
	}

	history := func(room string) []Message {
		h, err := ns[0].s.Messages.History(ctx, room, "", MaxHistoryLimit)
		require.NoError(t, err)
		return h
	}
	check := func(t *testing.T, batch string, out [][]SendReply, copies int) {
		for i, c := range cs {
			var mine []Message
			for _, m := range history(c.room) {
				if strings.HasPrefix(m.Text, c.user+" "+batch+" ") {
					mine = append(mine, m)
				}
			}
			require.Len(t, mine, 5*copies, "%s: each say stored once per call", c.user)
			for j, m := range mine {
				assert.Equal(t, fmt.Sprintf("%s %s %d", c.user, batch, j%5), m.Text, "%s: in the order sent", c.user)
			}
			require.Len(t, out[i], 5)
			for j, rep := range out[i] {
				require.NoError(t, rep.Err, "%s say %d", c.user, j)
				assert.Equal(t, batches[i][j].Text, rep.Message.Text)
				if rep.Duplicate {
					assert.Equal(t, mine[j].ID, rep.Message.ID, "%s say %d: a duplicate answers the first message", c.user, j)
				} else {
					assert.Equal(t, mine[len(mine)-5+j].ID, rep.Message.ID, "%s say %d: the answer is the stored message", c.user, j)
				}
			}
		}
	}
	t.Run("each say stored once, in each sender's order, answered with its message", func(t *testing.T) {
		for i := range out {
			for _, rep := range out[i] {
				assert.False(t, rep.Duplicate, "the call's own answer")
			}
		}
		check(t, "first", out, 1)
	})
	t.Run("the same batches again: keyed ones answered as duplicates, unkeyed ones new says", func(t *testing.T) {
		again := stallAndSend(t, r, ns, cs, batches, 0)
		for i, c := range cs {
			for _, rep := range again[i] {
				assert.Equal(t, c.keyed, rep.Duplicate, c.user)
			}
		}
		for i, c := range cs {
			if c.keyed {
				continue
			}
			var mine []Message
			for _, m := range history(c.room) {
				if strings.HasPrefix(m.Text, c.user+" first ") {
					mine = append(mine, m)
				}
			}
			require.Len(t, mine, 10, "%s: the unkeyed batch stored again", c.user)
			for j, rep := range again[i] {
				assert.Equal(t, mine[5+j].ID, rep.Message.ID)
			}
		}
		for i, c := range cs {
			if !c.keyed {
				continue
			}
			for j, rep := range again[i] {
				assert.Equal(t, out[i][j].Message.ID, rep.Message.ID, "%s say %d", c.user, j)
			}
		}
	})
}

// cmdCalls returns the calls of command name (lower case) in INFO
// commandstats of the server at addr, those inside scripts included.
func cmdCalls(t *testing.T, addr, name string) int {
	t.Helper()
	return int(redistest.CallsAt(t, addr, name))
}

// TestSendWindow: with Config.SendWindow a commit that would start within
// the window of the last one waits out the rest of it, and carries the
// says that came meanwhile; a quiet node (its last commit a window ago)
// and a full script call's says wait for nothing.
func TestSendWindow(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	const window = 2 * time.Second
	s := nodes(t, r, 1, Config{SendWindow: window, Capacity: fixed(100)})[0]
	var mu sync.Mutex
	var slept []time.Duration
	s.Messages.q.sleep = func(d time.Duration) {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
		time.Sleep(d)
	}
	sleeps := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), slept...)
	}
	var room string
	for i := range 70 {
		got, err := s.Seats.Join(ctx, "win", fmt.Sprintf("u%d", i), ws1)
		require.NoError(t, err)
		room = got.ID
	}
	opt := SendOptions{Rate: 1000, Burst: 1000}
	_, err := s.Messages.Send(ctx, room, "u0", "warm-up", opt)
	require.NoError(t, err)
	assert.Empty(t, sleeps(), "the first commit of a node waits for nothing")

	t.Run("says that come within the window share one script call", func(t *testing.T) {
		require.NoError(t, r.Client.ConfigResetStat(ctx).Err())
		var wg sync.WaitGroup
		out := make([][]SendReply, 5)
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = s.Messages.SendMany(ctx, []SendRequest{{Room: room, User: fmt.Sprintf("u%d", i+1), Text: "within", Key: fmt.Sprintf("w%d", i)}}, opt)
			}()
			time.Sleep(20 * time.Millisecond)
		}
		wg.Wait()
		for i := range out {
			require.NoError(t, out[i][0].Err)
		}
		assert.Equal(t, 1, evalshas(t, r), "one commit for the five calls")
		got := sleeps()
		require.Len(t, got, 1, "its committer waited out the window once")
		assert.LessOrEqual(t, got[0], window)
	})

	t.Run("a full script call's says do not wait", func(t *testing.T) {
		reqs := make([]SendRequest, maxScriptSays)
		for i := range reqs {
			reqs[i] = SendRequest{Room: room, User: fmt.Sprintf("u%d", i), Text: "full", Key: fmt.Sprintf("f%d", i)}
		}
		for _, rep := range s.Messages.SendMany(ctx, reqs, opt) {
			require.NoError(t, rep.Err)
		}
		assert.Len(t, sleeps(), 1, "no second wait")
	})

	t.Run("a quiet node sends at once", func(t *testing.T) {
		time.Sleep(window)
		_, err := s.Messages.Send(ctx, room, "u0", "quiet", opt)
		require.NoError(t, err)
		assert.Len(t, sleeps(), 1, "no second wait")
	})
}

// TestCommitContextIsBounded: a send commit ends within redisx.CallBound
// of its start whatever its callers' contexts (a REST request's has no
// deadline), so that go-redis sends no copy of its calls after a pause
// longer than the records that tell a retry from a new say live
// (redisx.CallRecordTTL for a say without a key, countedTTL for the
// commit's counter token). A node paused
// while it waited for Redis's answer would otherwise send the retry when
// it wakes, and a say without a key whose record had expired meanwhile
// was stored and published twice.
func TestCommitContextIsBounded(t *testing.T) {
	start := time.Now()
	none := context.Background()
	soon, cancel1 := context.WithTimeout(none, time.Second)
	defer cancel1()
	later, cancel2 := context.WithTimeout(none, redisx.CallBound/2)
	defer cancel2()
	late, cancel3 := context.WithTimeout(none, time.Hour)
	defer cancel3()
	deadline := func(ctx context.Context) time.Time {
		d, ok := ctx.Deadline()
		require.True(t, ok)
		return d
	}
	for _, tc := range []struct {
		name string
		ctxs []context.Context
		want time.Time
	}{
		{"a caller without a deadline", []context.Context{none}, start.Add(redisx.CallBound)},
		{"one of them without a deadline", []context.Context{soon, none}, start.Add(redisx.CallBound)},
		{"the latest of the callers' deadlines", []context.Context{soon, later}, deadline(later)},
		{"a deadline past the bound", []context.Context{soon, late}, start.Add(redisx.CallBound)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var jobs []*sendJob
			for _, ctx := range tc.ctxs {
				jobs = append(jobs, &sendJob{ctx: ctx})
			}
			ctx, cancel := commitContext(jobs, start)
			defer cancel()
			assert.Equal(t, tc.want, deadline(ctx))
		})
	}
	t.Run("no caller's cancellation ends it", func(t *testing.T) {
		gone, cancel := context.WithCancel(none)
		cancel()
		ctx, stop := commitContext([]*sendJob{{ctx: gone}}, start)
		defer stop()
		assert.NoError(t, ctx.Err())
	})
	// Copies sent up to redisx.CallBound after the first may wait in a slow
	// server's queue; the records outlive the bound by 20 s for them.
	assert.GreaterOrEqual(t, redisx.CallRecordTTL-redisx.CallBound, 20*time.Second)
	assert.GreaterOrEqual(t, countedTTL-redisx.CallBound, 20*time.Second)
}

// TestOneCommitOfSaysWithOtherRates: a script call's says share their say
// rate and bucket size (its arguments), so a commit that carries says of
// one lobby with other rates (a user's and the system's, which has no
// bucket) sends them in a call each, and each say is checked against its
// own: the user's third say is refused by her bucket of 2, the system's
// say is stored.
func TestOneCommitOfSaysWithOtherRates(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]
	room, err := s.Seats.Join(ctx, "rates", "alice", ws1)
	require.NoError(t, err)
	_, err = s.Messages.Send(ctx, room.ID, "alice", "warm-up", SendOptions{System: true})
	require.NoError(t, err)
	require.NoError(t, r.Client.ConfigResetStat(ctx).Err())

	// The committer is held before it takes alice's call,
	// until the system's call waits behind it: one commit carries both.
	gate := make(chan struct{})
	var once sync.Once
	s.Messages.beforeCommit = func() { once.Do(func() { <-gate }) }
	var wg sync.WaitGroup
	var user, system []SendReply
	wg.Go(func() {
		user = s.Messages.SendMany(ctx, []SendRequest{
			{Room: room.ID, User: "alice", Text: "one"}, {Room: room.ID, User: "alice", Text: "two"}, {Room: room.ID, User: "alice", Text: "three"},
		}, SendOptions{Rate: 0.001, Burst: 2})
	})
	require.Eventually(t, func() bool {
		s.Messages.q.mu.Lock()
		defer s.Messages.q.mu.Unlock()
		return s.Messages.q.busy
	}, 5*time.Second, time.Millisecond, "alice's call started the committer")
	wg.Go(func() {
		system = s.Messages.SendMany(ctx, []SendRequest{{Room: room.ID, Text: "the system"}}, SendOptions{System: true})
	})
	require.Eventually(t, func() bool {
		s.Messages.q.mu.Lock()
		defer s.Messages.q.mu.Unlock()
		return len(s.Messages.q.waiting) == 2 // alice's call is there until the committer takes it
	}, 5*time.Second, time.Millisecond, "the system's call waits behind alice's")
	close(gate)
	wg.Wait()

	require.NoError(t, user[0].Err)
	require.NoError(t, user[1].Err)
	assert.ErrorIs(t, user[2].Err, ErrRateLimited, "alice's bucket of 2")
	require.NoError(t, system[0].Err)
	calls := commandStats(t, r.Client)
	assert.Equal(t, int64(2), calls["evalsha"], "one commit, a script call for each rate")
	h, err := s.Messages.History(ctx, room.ID, "", MaxHistoryLimit)
	require.NoError(t, err)
	var texts []string
	for _, m := range h {
		texts = append(texts, m.Text)
	}
	assert.Equal(t, []string{"warm-up", "one", "two", "the system"}, texts)
}
