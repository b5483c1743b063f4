package matchmaking

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/lock"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// No matcher goroutine may outlive its test.
		err := goleak.Find(
			goleak.IgnoreAnyFunction("github.com/chatd/chatd/internal/redistest.(*Server).start.func1"),
			goleak.IgnoreAnyFunction("os/exec.(*Cmd).writerDescriptor.func1"),
		)
		if err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// backends are the Redis deployments the flows run on.
var backends = []struct {
	name string
	get  func(testing.TB) *redistest.Redis
}{
	{"server", redistest.Real},
	{"cluster", redistest.Cluster},
}

func forEachBackend(t *testing.T, fn func(t *testing.T, r *redistest.Redis)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.get(t))
		})
	}
}

func newClock() *testkit.Clock {
	return testkit.NewClock(time.UnixMilli(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli())) // in time.Local, as the services read times back
}

// recorder keeps what the hooks of every node were called with.
type recorder struct {
	mu      sync.Mutex
	calls   int              // OnMatched calls, duplicates included
	matches map[string]Match // by ID
	order   []string         // match IDs in first-call order
	expired map[string]Ticket
	changed chan struct{} // capacity 1: a hook was called
}

func newRecorder() *recorder {
	return &recorder{matches: map[string]Match{}, expired: map[string]Ticket{}, changed: make(chan struct{}, 1)}
}

func (r *recorder) onMatched(_ context.Context, m Match) error {
	r.mu.Lock()
	r.calls++
	if _, ok := r.matches[m.ID]; !ok {
		r.order = append(r.order, m.ID)
	}
	if prev, ok := r.matches[m.ID]; ok && len(prev.Tickets) != len(m.Tickets) {
		// Kept for the test to see: a repeated announcement must be the
		// same match.
		m.ID += "!differs"
	}
	r.matches[m.ID] = m
	r.mu.Unlock()
	r.poke()
	return nil
}

func (r *recorder) onExpired(_ context.Context, t Ticket) error {
	r.mu.Lock()
	r.expired[t.ID] = t
	r.mu.Unlock()
	r.poke()
	return nil
}

func (r *recorder) poke() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// waitMatches waits until n distinct matches have been announced. A
// ticket's status reads matched once the formation script has run, a
// moment before the matcher counts the match and calls OnMatched.
func (r *recorder) waitMatches(t testing.TB, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%d matches announced", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.matches) >= n
	})
}

func (r *recorder) snapshot() (map[string]Match, map[string]Ticket, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := make(map[string]Match, len(r.matches))
	for k, v := range r.matches {
		ms[k] = v
	}
	xs := make(map[string]Ticket, len(r.expired))
	for k, v := range r.expired {
		xs[k] = v
	}
	return ms, xs, r.calls
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// node is a simulated chatd node: its own Redis client, lock client,
// Service, Matchers and registry.
type node struct {
	svc    *Service
	mm     *Matchers
	locks  *lock.Client
	reg    *prometheus.Registry
	cancel context.CancelFunc // kills the node's matchers (no release)
}

// defs holds a live setting value the nodes of a test share.
type defs struct{ v atomic.Value }

func newDefs(raw string) *defs {
	d := &defs{}
	d.v.Store(raw)
	return d
}

func (d *defs) get() string    { return d.v.Load().(string) }
func (d *defs) set(raw string) { d.v.Store(raw) }

type setup struct {
	defs  *defs
	clock func() time.Time
	rec   *recorder
	mcfg  MatchersConfig
}

// newNode makes one node on r; start it with start.
func newNode(t testing.TB, r *redistest.Redis, s setup) *node {
	t.Helper()
	rdb := r.NewClient(t)
	reg := prometheus.NewRegistry()
	locks := lock.New(rdb, lock.Config{Prefix: r.Prefix})
	svc := New(rdb, Config{Prefix: r.Prefix, Queues: s.defs.get, Clock: s.clock, Registerer: reg, StatusTTL: time.Minute})
	cfg := s.mcfg
	cfg.Locks = locks
	if s.rec != nil {
		if cfg.OnMatched == nil {
			cfg.OnMatched = s.rec.onMatched
		}
		if cfg.OnExpired == nil {
			cfg.OnExpired = s.rec.onExpired
		}
	}
	mm, err := NewMatchers(svc, cfg)
	require.NoError(t, err)
	return &node{svc: svc, mm: mm, locks: locks, reg: reg}
}

// start starts n's matchers; the test's cleanup stops them.
func (n *node) start(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	require.NoError(t, n.mm.Start(ctx))
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		require.NoError(t, n.mm.Stop(sctx))
		cancel()
	})
}

// submit submits a ticket or fails the test.
func submit(t testing.TB, s *Service, queue string, tk Ticket) string {
	t.Helper()
	id, err := s.Submit(context.Background(), queue, tk)
	require.NoError(t, err)
	return id
}
