package ratelimit

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/promreg"
	"github.com/chatd/chatd/names"
)

// DefaultRate is the rate, in messages per second, used when Config.Rate is
// nil or returns a value that is not a positive finite number.
const DefaultRate = 10

// slack is how long a bucket key outlives the moment it would be full again.
// A full bucket and no bucket are the same, so any slack is correct; a
// generous one keeps a bucket alive when the injected clock runs slower than
// the server's TTL clock (tests, or a node whose clock lags).
const slack = time.Minute

// Config configures a Limiter. The zero value is usable.
type Config struct {
	// Prefix is the key prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// Rate returns the current rate in messages per second, read on every
	// check (wire it to the live setting rate.messages_per_second); nil, or
	// a result that is not a positive finite number, = DefaultRate.
	Rate func() float64
	// Burst returns the bucket's capacity, read on every check with Rate;
	// nil, or a result that is not a finite number >= 1, = max(1, rate).
	// A per-minute cap of N is Rate N/60 with Burst N: N at once, then one
	// every 60/N seconds.
	Burst func() float64
	// Window, when positive, makes the Limiter a sliding window instead
	// of a token bucket: at most Burst events (rounded down) in any window
	// of this length, exactly, logged in a ZSET per key (Rate is not
	// used). A cap of N per minute as a bucket of N refilling at N/60 lets
	// 2N through in 60 s; as a window of a minute it lets N. 0 = a bucket.
	Window time.Duration
	// Now is the clock passed to Redis with each check, and of the local
	// refusals; nil = time.Now.
	Now func() time.Time
	// MaxEmpty bounds how many keys the Limiter remembers as empty (see
	// Allow); 0 = DefaultMaxEmpty.
	MaxEmpty int
	// Registerer receives the limiter's metrics; nil = not registered.
	Registerer prometheus.Registerer
}

// DefaultMaxEmpty is how many keys a Limiter remembers as empty when
// Config.MaxEmpty is 0.
const DefaultMaxEmpty = 100_000

// Limiter is a per-user token bucket shared by every node through Redis.
// It is safe for concurrent use.
type Limiter struct {
	rdb      redis.UniversalClient
	keys     keys
	rate     func() float64
	burst    func() float64
	now      func() time.Time
	window   time.Duration
	checks   *prometheus.CounterVec
	refusals *prometheus.CounterVec
	evicted  prometheus.Counter

	mu        sync.Mutex
	maxEmpty  int
	empty     map[string]emptyBucket // keys Redis said are empty, until when
	lastSweep time.Time
}

// emptyBucket is what Redis answered about a refused key: no token before
// until, at this rate and burst; at is when it was asked.
type emptyBucket struct {
	at, until   time.Time
	rate, burst float64
}

// New returns a Limiter over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Limiter {
	l := &Limiter{
		rdb:    rdb,
		keys:   keys{keyspace.New(cfg.Prefix)},
		rate:   cfg.Rate,
		burst:  cfg.Burst,
		now:    cfg.Now,
		window: cfg.Window,
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd",
			Subsystem: "ratelimit",
			Name:      "checks_total",
			Help:      "Rate-limit checks by result: allowed, limited or error.",
		}, []string{"result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd",
			Subsystem: "ratelimit",
			Name:      "refusals_total",
			Help: "Refused checks by source: redis (the bucket script said empty) or local " +
				"(refused from memory while the bucket is known empty, no Redis call).",
		}, []string{"source"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "chatd",
			Subsystem: "ratelimit",
			Name:      "empty_evictions_total",
			Help:      "Empty buckets forgotten before their refill to stay within Config.MaxEmpty.",
		}),
		maxEmpty: cfg.MaxEmpty,
		empty:    map[string]emptyBucket{},
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.maxEmpty <= 0 {
		l.maxEmpty = DefaultMaxEmpty
	}
	if cfg.Registerer != nil {
		l.checks = promreg.Register(cfg.Registerer, l.checks)
		l.refusals = promreg.Register(cfg.Registerer, l.refusals)
		l.evicted = promreg.Register(cfg.Registerer, l.evicted)
	}
	return l
}

// Rate returns the rate in force now, in tokens per second, and the burst:
// Config.Burst when it gives a finite number >= 1, else max(1, rate).
func (l *Limiter) Rate() (rate, burst float64) {
	rate = DefaultRate
	if l.rate != nil {
		if r := l.rate(); r > 0 && !math.IsInf(r, 0) {
			rate = r
		}
	}
	burst = math.Max(1, rate)
	if l.burst != nil {
		if b := l.burst(); b >= 1 && !math.IsInf(b, 0) {
			burst = b
		}
	}
	return rate, burst
}

// Allow takes one token from user's bucket: ok is true when the message may
// go; otherwise retryAfter says when the next token will be there. It makes
// one round trip (one Lua script), except while the bucket is known empty:
// after Redis refused with "retry in r", the Limiter remembers the key as
// empty until now+r and refuses it from memory, with the retry-after left,
// without asking Redis — a flood of refused calls costs Redis one script,
// not one per call. No node can fill a bucket faster than its rate, so
// until then Redis would refuse too; the memory is not used when the rate
// or burst in force differs from the one Redis answered for (a live change
// applies at once) or when the clock went back. It holds at most
// Config.MaxEmpty keys, each gone at its refill time. The error wraps
// names.ErrBadName for an invalid user name, or the Redis error; ok is
// false with any error.
func (l *Limiter) Allow(ctx context.Context, user string) (ok bool, retryAfter time.Duration, err error) {
	if err := names.User(user); err != nil {
		return false, 0, fmt.Errorf("ratelimit: allow: %w", err)
	}
	rate, burst := l.Rate()
	t := l.now()
	if wait, known := l.knownEmpty(user, t, rate, burst); known {
		l.checks.WithLabelValues("limited").Inc()
		l.refusals.WithLabelValues("local").Inc()
		return false, wait, nil
	}
	var res []int64
	if l.window > 0 {
		res, err = windowScript.Run(ctx, l.rdb, []string{l.keys.window(user)},
			t.UnixMilli(), l.window.Milliseconds(), int64(burst), eventID(),
		).Int64Slice()
	} else {
		res, err = takeScript.Run(ctx, l.rdb, []string{l.keys.bucket(user)},
			t.UnixMilli(),
			strconv.FormatFloat(rate, 'g', -1, 64),
			strconv.FormatFloat(burst, 'g', -1, 64),
			slack.Milliseconds(),
		).Int64Slice()
	}
	if err != nil {
		l.checks.WithLabelValues("error").Inc()
		return false, 0, fmt.Errorf("ratelimit: allow %s: %w", user, err)
	}
	if len(res) != 2 {
		l.checks.WithLabelValues("error").Inc()
		return false, 0, fmt.Errorf("ratelimit: allow %s: unexpected reply %v", user, res)
	}
	if res[0] == 1 {
		l.checks.WithLabelValues("allowed").Inc()
		return true, 0, nil
	}
	l.checks.WithLabelValues("limited").Inc()
	l.refusals.WithLabelValues("redis").Inc()
	retryAfter = time.Duration(res[1]) * time.Millisecond
	l.rememberEmpty(user, emptyBucket{at: t, until: t.Add(retryAfter), rate: rate, burst: burst})
	return false, retryAfter, nil
}

// knownEmpty reports whether user's bucket is known to hold no token at t
// for this rate and burst, and how long until it does.
func (l *Limiter) knownEmpty(user string, t time.Time, rate, burst float64) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.empty[user]
	if !ok {
		return 0, false
	}
	if t.Before(e.at) || !t.Before(e.until) || e.rate != rate || e.burst != burst {
		delete(l.empty, user)
		return 0, false
	}
	return e.until.Sub(t), true
}

// rememberEmpty notes e for user, keeping the map within maxEmpty: the
// ended entries are swept (at most once a second), and if it is still
// full, one entry is forgotten (that key is then asked of Redis again).
func (l *Limiter) rememberEmpty(user string, e emptyBucket) {
	if e.until.Sub(e.at) <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.empty[user]; !ok && len(l.empty) >= l.maxEmpty {
		if d := e.at.Sub(l.lastSweep); d < 0 || d >= time.Second {
			l.lastSweep = e.at
			for k, v := range l.empty {
				if !e.at.Before(v.until) {
					delete(l.empty, k)
				}
			}
		}
		for k := range l.empty {
			if len(l.empty) < l.maxEmpty {
				break
			}
			delete(l.empty, k) // map order: an arbitrary one
			l.evicted.Inc()
		}
	}
	l.empty[user] = e
}

// eventID is a unique member for a sliding-window log: 16 random hex
// digits (two events of one key in the same millisecond, on any node, stay
// two members).
func eventID() string {
	return strconv.FormatUint(rand.Uint64(), 16)
}
