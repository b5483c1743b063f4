package identity

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/promreg"
	"github.com/chatd/chatd/names"
)

// DefaultTTL is how long a claim lasts after its last renewal when
// Config.TTL is nil or returns a value below one millisecond.
const DefaultTTL = 30 * time.Minute

// MaxSessionLen is the longest session id, in bytes.
const MaxSessionLen = 64

// Config configures a Registry. The zero value is usable.
type Config struct {
	// Prefix is the key prefix; "" means keyspace.DefaultPrefix.
	Prefix string
	// TTL returns how long a claim lasts after its last Claim or Touch, read
	// on every call; nil, or a value below one millisecond, means
	// DefaultTTL. A session idle for between 3/4 TTL and TTL loses its name
	// (see Touch).
	TTL func() time.Duration
	// Now is the clock of Holder's until and of the Touch throttle; nil
	// means time.Now. Expiry itself is Redis's clock.
	Now func() time.Time
	// Registerer receives the metrics (chatd_identity_*); nil means not
	// registered. Registries may share one.
	Registerer prometheus.Registerer
}

// Registry holds guest-name claims: which one session may use a name. It is
// safe for concurrent use. Its only local state is the Touch throttle; every
// node may use its own Registry on the same Redis.
type Registry struct {
	rdb   redis.Scripter
	space keyspace.Space
	ttl   func() time.Duration
	now   func() time.Time
	calls *prometheus.CounterVec

	mu        sync.Mutex
	touched   map[claimant]time.Time // last renewal sent to Redis, per session
	lastSweep time.Time
}

// claimant is one session of one name.
type claimant struct{ name, session string }

// New returns a Registry whose claims live in rdb.
func New(rdb redis.Scripter, cfg Config) *Registry {
	r := &Registry{
		rdb:     rdb,
		space:   keyspace.New(cfg.Prefix),
		ttl:     cfg.TTL,
		now:     cfg.Now,
		touched: map[claimant]time.Time{},
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "identity", Name: "calls_total",
			Help: "Name-claim calls by op (claim, touch, release) and result " +
				"(claimed, renewed, taken, throttled, lost, released, error).",
		}, []string{"op", "result"}),
	}
	if r.now == nil {
		r.now = time.Now
	}
	if cfg.Registerer != nil {
		r.calls = promreg.Register(cfg.Registerer, r.calls)
	}
	return r
}

// TTL returns the claim lifetime in force now.
func (r *Registry) TTL() time.Duration {
	if r.ttl != nil {
		if d := r.ttl(); d >= time.Millisecond {
			return d
		}
	}
	return DefaultTTL
}

// Claim gives name to session for TTL: it succeeds when the name is free,
// and when session holds it already (the claim is renewed: Claim is
// idempotent, so a retry whose first reply was lost succeeds). It returns
// ErrNameTaken when another session holds the name, names.ErrBadName
// (wrapped) for a bad name or session id, or the Redis error. One round trip.
func (r *Registry) Claim(ctx context.Context, name, session string) error {
	if err := check(name, session); err != nil {
		return fmt.Errorf("identity: claim: %w", err)
	}
	now := r.now()
	res, err := acquireScript.Run(ctx, r.rdb, []string{claimKey(r.space, name)}, session, r.TTL().Milliseconds()).Int64()
	if err != nil {
		r.calls.WithLabelValues("claim", "error").Inc()
		return fmt.Errorf("identity: claim %s: %w", name, err)
	}
	switch res {
	case 1, 2:
		result := "claimed"
		if res == 2 {
			result = "renewed"
		}
		r.calls.WithLabelValues("claim", result).Inc()
		r.remember(claimant{name, session}, now)
		return nil
	case 0:
		r.calls.WithLabelValues("claim", "taken").Inc()
		return fmt.Errorf("identity: claim %s: %w", name, ErrNameTaken)
	}
	r.calls.WithLabelValues("claim", "error").Inc()
	return fmt.Errorf("identity: claim %s: unexpected reply %d", name, res)
}

// Touch renews session's claim of name for another TTL; call it on every
// request of the session. It costs one round trip at most every TTL/4 per
// session and node: a Touch within TTL/4 of this node's last renewal of the
// same claim returns nil without asking Redis, so a session that stops
// making requests keeps its name between 3/4 TTL and TTL. It returns
// ErrNotHolder when the claim expired, was released or belongs to another
// session (the caller refuses the token; the name is not taken back),
// names.ErrBadName (wrapped) for a bad name or session id, or the Redis
// error.
//
// Because of the throttle, a Release made on another node is seen here
// after at most TTL/4.
func (r *Registry) Touch(ctx context.Context, name, session string) error {
	if err := check(name, session); err != nil {
		return fmt.Errorf("identity: touch: %w", err)
	}
	ttl := r.TTL()
	now := r.now()
	c := claimant{name, session}
	r.mu.Lock()
	last, ok := r.touched[c]
	r.mu.Unlock()
	if ok && now.Sub(last) >= 0 && now.Sub(last) < ttl/4 {
		r.calls.WithLabelValues("touch", "throttled").Inc()
		return nil
	}
	res, err := touchScript.Run(ctx, r.rdb, []string{claimKey(r.space, name)}, session, ttl.Milliseconds()).Int64()
	if err != nil {
		r.calls.WithLabelValues("touch", "error").Inc()
		return fmt.Errorf("identity: touch %s: %w", name, err)
	}
	if res != 1 {
		r.forget(c)
		r.calls.WithLabelValues("touch", "lost").Inc()
		return fmt.Errorf("identity: touch %s: %w", name, ErrNotHolder)
	}
	r.calls.WithLabelValues("touch", "renewed").Inc()
	r.remember(c, now)
	return nil
}

// Release frees name if session holds it (sign out): compare-and-delete, so
// a session whose claim expired and was taken by another cannot free the
// other's name. It returns ErrNotHolder when session did not hold it
// (nothing is deleted), names.ErrBadName (wrapped) for a bad name or session
// id, or the Redis error.
func (r *Registry) Release(ctx context.Context, name, session string) error {
	if err := check(name, session); err != nil {
		return fmt.Errorf("identity: release: %w", err)
	}
	r.forget(claimant{name, session})
	res, err := releaseScript.Run(ctx, r.rdb, []string{claimKey(r.space, name)}, session).Int64()
	if err != nil {
		r.calls.WithLabelValues("release", "error").Inc()
		return fmt.Errorf("identity: release %s: %w", name, err)
	}
	if res != 1 {
		r.calls.WithLabelValues("release", "lost").Inc()
		return fmt.Errorf("identity: release %s: %w", name, ErrNotHolder)
	}
	r.calls.WithLabelValues("release", "released").Inc()
	return nil
}

// Holder returns the session holding name and when its claim ends unless
// renewed (by this Registry's clock); session is "" and until zero when the
// name is free. It returns names.ErrBadName (wrapped) for a bad name, or the
// Redis error.
func (r *Registry) Holder(ctx context.Context, name string) (session string, until time.Time, err error) {
	if err := names.User(name); err != nil {
		return "", time.Time{}, fmt.Errorf("identity: holder: %w", err)
	}
	res, err := readScript.Run(ctx, r.rdb, []string{claimKey(r.space, name)}).Slice()
	if errors.Is(err, redis.Nil) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: holder %s: %w", name, err)
	}
	if len(res) != 2 {
		return "", time.Time{}, fmt.Errorf("identity: holder %s: unexpected reply %v", name, res)
	}
	session, ok1 := res[0].(string)
	pttl, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return "", time.Time{}, fmt.Errorf("identity: holder %s: unexpected reply %v", name, res)
	}
	if pttl < 0 { // no TTL: written by something else than this package
		return session, time.Time{}, nil
	}
	return session, r.now().Add(time.Duration(pttl) * time.Millisecond), nil
}

// remember notes a renewal sent at now, and drops notes too old to throttle
// anything (at most once per TTL/4), so the map holds only recently active
// sessions.
func (r *Registry) remember(c claimant, now time.Time) {
	quarter := r.TTL() / 4
	r.mu.Lock()
	defer r.mu.Unlock()
	r.touched[c] = now
	if now.Sub(r.lastSweep) < quarter {
		return
	}
	r.lastSweep = now
	for k, t := range r.touched {
		if now.Sub(t) >= quarter || now.Before(t) {
			delete(r.touched, k)
		}
	}
}

// forget drops the throttle note of c, so its next Touch asks Redis.
func (r *Registry) forget(c claimant) {
	r.mu.Lock()
	delete(r.touched, c)
	r.mu.Unlock()
}

// check validates a name and a session id: 1–MaxSessionLen of
// [A-Za-z0-9_-].
func check(name, session string) error {
	if err := names.User(name); err != nil {
		return err
	}
	if session == "" || len(session) > MaxSessionLen {
		return fmt.Errorf("%w: session id must have 1-%d characters", names.ErrBadName, MaxSessionLen)
	}
	for i := 0; i < len(session); i++ {
		c := session[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: session id may only hold A-Z a-z 0-9 _ -", names.ErrBadName)
		}
	}
	return nil
}

// RateKey returns the key under which to rate-limit session creation from
// the client address ip (as Fiber's c.IP() gives it): "ip4-" and the 8 hex
// digits of an IPv4 address, or "ip6-" and the 16 hex digits of an IPv6
// address's /64 (one subscriber usually gets a whole /64, so limiting single
// IPv6 addresses limits nothing). An IPv4-mapped IPv6 address counts as its
// IPv4 address. The key is a valid user name, so it fits
// ratelimit.Limiter.Allow; use a Limiter of its own prefix so that no user
// named like a key shares its bucket. It returns names.ErrBadName (wrapped)
// when ip does not parse.
func RateKey(ip string) (string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", fmt.Errorf("%w: client address %q: %v", names.ErrBadName, ip, err)
	}
	a = a.Unmap()
	if a.Is4() {
		b := a.As4()
		return "ip4-" + hex.EncodeToString(b[:]), nil
	}
	b := a.As16()
	return "ip6-" + hex.EncodeToString(b[:8]), nil
}
