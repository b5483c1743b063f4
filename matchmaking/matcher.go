package matchmaking

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/chatd/chatd/lock"
)

// MatchersConfig configures Matchers. Locks is required; the other zero
// values are usable.
type MatchersConfig struct {
	// Locks takes the queues' locks ("mm:<queue>", package lock).
	Locks *lock.Client
	// Lease is the TTL of a queue's lock, refreshed by its holder every
	// Lease/3: when the holder dies, another node takes over within about
	// Lease + TryEvery. 0 = 5 seconds.
	Lease time.Duration
	// Tick is the pause between two rounds of a queue's matcher; a round
	// that chose as many matches or expiries as it may runs the next at
	// once. 0 = 200ms.
	Tick time.Duration
	// TryEvery is how often a node tries to take the lock of each defined
	// queue it does not hold (jittered). 0 = Lease/5.
	TryEvery time.Duration
	// OnMatched is called by the queue's matcher for every formed match,
	// after the formation script: create the match room, tell the players.
	// It is called at least once per match (again when it returns an
	// error, and by the next holder when this one dies before its call was
	// acknowledged), so it must be idempotent by Match.ID. nil = none.
	OnMatched func(ctx context.Context, m Match) error
	// OnExpired is called likewise for every ticket that waited past its
	// queue's max wait. nil = none.
	OnExpired func(ctx context.Context, t Ticket) error
	// OnPending is called by the queue's matcher every PendingEvery with
	// the queue's pending parties (at most MaxPending, those whose
	// invitations lapse first), for the caller to dissolve those one of
	// whose players went away (Cancel). nil = none: a party then waits for
	// its acceptances or its deadline.
	OnPending func(ctx context.Context, pending []Status) error
	// PendingEvery is how often OnPending is called; 0 = 2 s.
	PendingEvery time.Duration
	// MaxPending is the most pending parties one OnPending call gets;
	// 0 = 256.
	MaxPending int
	// MaxMatches is the most matches one round forms (one script call
	// each way); 0 = 64. Rounds of large matches form fewer (at most about
	// 1,000 tickets per round).
	MaxMatches int
	// Seeds is how many of the oldest tickets one round tries to match;
	// 0 = 128.
	Seeds int
	// FreshSeeds is how many newly submitted tickets one round tries to
	// match, each once, wherever it sits in the queue; rounds run back to
	// back while more wait. 0 = 128.
	FreshSeeds int
	// SweepSeeds is how many tickets of the sweep over the pool (skill
	// order, wrapping round) one round tries to match: it finds the pairs
	// that widening made compatible among tickets neither old nor new.
	// 0 = 64.
	SweepSeeds int
}

// Matchers runs, on every node, the matcher of each queue whose lock this
// node holds: one matcher per queue in the whole deployment at a time.
// Start it once; Stop it at shutdown.
type Matchers struct {
	svc *Service
	cfg MatchersConfig

	mu      sync.Mutex
	started bool
	cancel  context.CancelCauseFunc
	held    map[string]*holder
	wg      sync.WaitGroup

	// Test seams: beforeForm runs between choosing and the fenced
	// formation script (a pause there is a paused holder); afterRound after
	// every round.
	beforeForm func(ctx context.Context, queue string, l *lock.Lock)
	afterRound func(queue string)
}

// Causes of a holder's end that hand its lock over at once (released),
// unlike a canceled Start context: a killed node's locks expire.
var (
	errStopping     = errors.New("matchmaking: matchers stopping")
	errQueueRemoved = errors.New("matchmaking: queue no longer defined")
)

const (
	defaultLease      = 5 * time.Second
	defaultTick       = 200 * time.Millisecond
	defaultMaxMatches = 64
	defaultSeeds      = 128
	defaultFreshSeeds = 128
	defaultSweepSeeds = 64
	maxRoundTickets   = 1024
	drainBatch        = 256
)

// NewMatchers returns the matchers of svc's queues. It returns an error when
// cfg.Locks is nil.
func NewMatchers(svc *Service, cfg MatchersConfig) (*Matchers, error) {
	if cfg.Locks == nil {
		return nil, errors.New("matchmaking: MatchersConfig.Locks is required")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = defaultLease
	}
	cfg.Lease = max(cfg.Lease, 30*time.Millisecond)
	if cfg.Tick <= 0 {
		cfg.Tick = defaultTick
	}
	if cfg.TryEvery <= 0 {
		cfg.TryEvery = cfg.Lease / 5
	}
	if cfg.MaxMatches <= 0 {
		cfg.MaxMatches = defaultMaxMatches
	}
	if cfg.PendingEvery <= 0 {
		cfg.PendingEvery = 2 * time.Second
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 256
	}
	if cfg.Seeds <= 0 {
		cfg.Seeds = defaultSeeds
	}
	if cfg.FreshSeeds <= 0 {
		cfg.FreshSeeds = defaultFreshSeeds
	}
	if cfg.SweepSeeds <= 0 {
		cfg.SweepSeeds = defaultSweepSeeds
	}
	return &Matchers{svc: svc, cfg: cfg, held: map[string]*holder{}}, nil
}

// Start runs the matchers until ctx ends or Stop is called: every TryEvery
// it tries to take the lock of each defined queue it does not hold
// (lock.TryAcquire), and while it holds one it runs that queue's matcher.
// A queue removed from the setting is given up (its lock released). It
// returns ErrStarted when called twice.
//
// When ctx ends, the matchers stop without releasing their locks, as if
// the node had died: other nodes take the queues over once the leases
// expire. Stop releases them, so others take over at once.
func (m *Matchers) Start(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return ErrStarted
	}
	m.started = true
	run, cancel := context.WithCancelCause(ctx)
	m.cancel = cancel
	m.wg.Add(1)
	go m.supervise(run)
	return nil
}

// Stop ends every matcher of this node and releases their locks, and
// waits for them (a hook running then sees its context canceled), or until
// ctx ends, returning ctx's error. A Matchers is not restarted.
func (m *Matchers) Stop(ctx context.Context) error {
	m.mu.Lock()
	cancel := m.cancel
	m.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel(errStopping)
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("matchmaking: stop: %w", ctx.Err())
	}
}

// Holding returns the queues whose matcher runs on this node, sorted.
func (m *Matchers) Holding() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.held))
	for q := range m.held {
		out = append(out, q)
	}
	slices.Sort(out)
	return out
}

// supervise takes the locks of the queues this node does not hold, every
// TryEvery, and gives up the queues that are no longer defined.
func (m *Matchers) supervise(ctx context.Context) {
	defer m.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.round(ctx)
		every := m.cfg.TryEvery
		t.Reset(every/2 + rand.N(every/2+1))
	}
}

func (m *Matchers) round(ctx context.Context) {
	queues := m.svc.Queues()
	defined := map[string]bool{}
	for _, q := range queues {
		defined[q.Name] = true
		m.mu.Lock()
		_, running := m.held[q.Name]
		m.mu.Unlock()
		if running {
			continue
		}
		sent := time.Now()
		tctx, cancel := context.WithTimeout(ctx, m.cfg.Lease)
		l, err := m.cfg.Locks.TryAcquire(tctx, lockName(q.Name), m.cfg.Lease)
		cancel()
		if err != nil {
			if !errors.Is(err, lock.ErrNotObtained) && ctx.Err() == nil {
				m.svc.log.Warn("matchmaking: taking a queue's lock failed", "queue", q.Name, "err", err)
			}
			continue
		}
		m.hold(ctx, q.Name, l, sent)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, h := range m.held {
		if !defined[name] {
			h.cancel(errQueueRemoved)
		}
	}
}

// hold runs the matcher of queue under l until it loses the lock, the
// queue goes, or the Matchers stop.
func (m *Matchers) hold(ctx context.Context, queue string, l *lock.Lock, sent time.Time) {
	hctx, cancel := context.WithCancelCause(ctx)
	h := &holder{m: m, svc: m.svc, queue: queue, l: l, lastOK: sent, cancel: cancel, retry: map[string]retryState{}}
	m.mu.Lock()
	m.held[queue] = h
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		err := h.run(hctx)
		cause := context.Cause(hctx)
		if errors.Is(cause, errStopping) || errors.Is(cause, errQueueRemoved) || errors.Is(err, errQueueRemoved) {
			h.handOver(context.WithoutCancel(hctx))
		} else if err != nil && !errors.Is(err, context.Canceled) {
			m.svc.log.Warn("matchmaking: matcher ended", "queue", queue, "fence", l.Fence(), "err", err)
		}
		cancel(nil)
		m.mu.Lock()
		delete(m.held, queue)
		m.mu.Unlock()
		m.svc.m.forget(queue)
	}()
}
