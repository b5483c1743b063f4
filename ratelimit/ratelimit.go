package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
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
	// Now is the clock passed to Redis with each check; nil = time.Now.
	Now func() time.Time
	// Registerer receives the limiter's metrics; nil = not registered.
	Registerer prometheus.Registerer
}

// Limiter is a per-user token bucket shared by every node through Redis.
// It is safe for concurrent use.
type Limiter struct {
	rdb    redis.UniversalClient
	keys   keys
	rate   func() float64
	burst  func() float64
	now    func() time.Time
	checks *prometheus.CounterVec
}

// New returns a Limiter over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Limiter {
	l := &Limiter{
		rdb:   rdb,
		keys:  keys{keyspace.New(cfg.Prefix)},
		rate:  cfg.Rate,
		burst: cfg.Burst,
		now:   cfg.Now,
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd",
			Subsystem: "ratelimit",
			Name:      "checks_total",
			Help:      "Rate-limit checks by result: allowed, limited or error.",
		}, []string{"result"}),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if cfg.Registerer != nil {
		l.checks = register(cfg.Registerer, l.checks)
	}
	return l
}

// register registers c, or returns the collector already registered under
// its name (several limiters in one process share the counters).
func register(r prometheus.Registerer, c *prometheus.CounterVec) *prometheus.CounterVec {
	if err := r.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if prev, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return prev
			}
		}
	}
	return c
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
// one round trip (one Lua script). The error wraps names.ErrBadName for an
// invalid user name, or the Redis error; ok is false with any error.
func (l *Limiter) Allow(ctx context.Context, user string) (ok bool, retryAfter time.Duration, err error) {
	if err := names.User(user); err != nil {
		return false, 0, fmt.Errorf("ratelimit: allow: %w", err)
	}
	rate, burst := l.Rate()
	now := l.now().UnixMilli()
	res, err := takeScript.Run(ctx, l.rdb, []string{l.keys.bucket(user)},
		now,
		strconv.FormatFloat(rate, 'g', -1, 64),
		strconv.FormatFloat(burst, 'g', -1, 64),
		slack.Milliseconds(),
	).Int64Slice()
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
	return false, time.Duration(res[1]) * time.Millisecond, nil
}
