package identity

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// DefaultTTL is how long a claim lasts after its last renewal when
// Config.TTL is nil or returns a value below one millisecond.
const DefaultTTL = 30 * time.Minute

// MaxSessionLen is the longest holder id, in bytes.
const MaxSessionLen = 64

// Defaults of the bounds of a Registry's memory.
const (
	// DefaultMaxAdmits is how many holders a Registry remembers having
	// admitted (its Admit cache and the claims it gives back after a
	// resubscription) when Config.MaxAdmits is 0.
	DefaultMaxAdmits = 100_000
	// DefaultMaxRevocations is how many signed-out holders a Registry
	// remembers until their tokens expire when Config.MaxRevocations is 0.
	DefaultMaxRevocations = 100_000
)

// Config configures a Registry. The zero value is usable.
type Config struct {
	// Prefix is the key and channel prefix; "" means keyspace.DefaultPrefix.
	Prefix string
	// TTL returns how long a claim lasts after its last Claim or Admit that
	// reached Redis, read on every call; nil, or a value below one
	// millisecond, means DefaultTTL. A guest idle for between 3/4 TTL and
	// TTL loses its name to the next guest who claims it (see Admit).
	TTL func() time.Duration
	// Now is the clock of Holder's until, of the Admit cache, of the
	// revocation times and of what a claim has left; nil means time.Now.
	// A claim's expiry itself is Redis's clock; revocations compare the
	// token's expiry with this clock (nodes keep NTP time).
	Now func() time.Time
	// OnEnded is called, after Start, once for each holder whose session
	// ended by another node's (or this node's) doing: it signed out
	// (Release), another holder claimed its name, or a claim this node
	// gave back after a resubscription was found taken. name is the
	// canonical name (names.Canonical): close that holder's connections
	// (WebSocket close 4000). It runs on the Registry's own goroutine, one
	// call at a time; it may call the Registry. nil means none.
	OnEnded func(name, holder string)
	// MaxAdmits bounds how many admitted holders the Registry remembers
	// (least recently confirmed evicted first); 0 means DefaultMaxAdmits.
	MaxAdmits int
	// MaxRevocations bounds how many signed-out holders the Registry
	// remembers until their tokens expire (oldest evicted first); 0 means
	// DefaultMaxRevocations.
	MaxRevocations int
	// Logger receives failed re-writes after a resubscription and
	// malformed events; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (chatd_identity_*); nil means not
	// registered. Registries may share one.
	Registerer prometheus.Registerer
}

// Registry holds guest-name claims: which one holder may use a name. It is
// safe for concurrent use; every node uses its own Registry on the same
// Redis. Its local state (see the package doc) is a bounded memory of the
// holders it admitted and of the holders that signed out, kept in step
// with the other nodes over pub/sub once started (Start).
type Registry struct {
	rdb     redis.Cmdable
	space   keyspace.Space
	ttl     func() time.Duration
	now     func() time.Time
	onEnded func(name, holder string)
	log     *slog.Logger
	m       metrics

	mu     sync.Mutex
	mem    *memory
	sub    Subscriber // set while started: its Ready says whether events flow
	ended  []claimant // OnEnded calls to make, in order
	endedC chan struct{}
	again  chan struct{} // a re-write after a resubscription is asked for

	started bool
	subn    *bus.Subscription
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// New returns a Registry whose claims live in rdb (a client, a Cluster
// client or a failover client). Claim, Admit, Release and Holder work at
// once; call Start to follow the other nodes (without it, Admit asks
// Redis every time and OnEnded is never called).
func New(rdb redis.Cmdable, cfg Config) *Registry {
	if cfg.MaxAdmits <= 0 {
		cfg.MaxAdmits = DefaultMaxAdmits
	}
	if cfg.MaxRevocations <= 0 {
		cfg.MaxRevocations = DefaultMaxRevocations
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Registry{
		rdb:     rdb,
		space:   keyspace.New(cfg.Prefix),
		ttl:     cfg.TTL,
		now:     cfg.Now,
		onEnded: cfg.OnEnded,
		log:     cfg.Logger.With("component", "identity"),
		m:       newMetrics(cfg.Registerer),
		mem:     newMemory(cfg.MaxAdmits, cfg.MaxRevocations),
		endedC:  make(chan struct{}, 1),
		again:   make(chan struct{}, 1),
	}
	if r.now == nil {
		r.now = time.Now
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

// Claim gives name to holder for TTL: it succeeds when the name (in its
// canonical form: "MISC1" is "Misc1") is free, and when holder has it
// already (the claim is renewed: Claim is idempotent, so a retry whose
// first reply was lost succeeds, and a second device of the guest gets a
// session of its own). A fresh claim is published on the registry's
// channel, so that every node drops what it cached of the name's earlier
// holders. The display form of the name is the caller's to keep (the token
// carries it). It returns ErrNameTaken when another holder has the name,
// ErrSignedOut when holder signed out, names.ErrBadName (wrapped) for a
// bad name or holder id, or the Redis error. One round trip.
func (r *Registry) Claim(ctx context.Context, name, holder string) error {
	if err := check(name, holder); err != nil {
		return fmt.Errorf("identity: claim: %w", err)
	}
	c := claimant{names.Canonical(name), holder}
	now, ttl := r.now(), r.TTL()
	r.mu.Lock()
	revoked := r.mem.isRevoked(c, now)
	gen := r.mem.gen
	r.mu.Unlock()
	if revoked {
		r.m.calls.WithLabelValues("claim", "signed_out").Inc()
		return fmt.Errorf("identity: claim %s: %w", name, ErrSignedOut)
	}
	res, err := acquireScript.Run(ctx, r.rdb, r.keys(c.user), holder, ttl.Milliseconds(), now.UnixMilli(),
		r.Channel(), encodeEvent(Event{Type: EventClaimed, User: c.user, Holder: holder})).Slice()
	code, until, err := scriptReply(res, err)
	if err != nil {
		r.m.calls.WithLabelValues("claim", "error").Inc()
		return fmt.Errorf("identity: claim %s: %w", name, err)
	}
	switch code {
	case 1, 2:
		result := "claimed"
		if code == 2 {
			result = "renewed"
		}
		r.m.calls.WithLabelValues("claim", result).Inc()
		r.confirm(c, name, now, time.Time{}, gen)
		return nil
	case 0:
		r.m.calls.WithLabelValues("claim", "taken").Inc()
		return fmt.Errorf("identity: claim %s: %w", name, ErrNameTaken)
	case -1:
		r.m.calls.WithLabelValues("claim", "signed_out").Inc()
		r.learnRevoked(c, until, now)
		return fmt.Errorf("identity: claim %s: %w", name, ErrSignedOut)
	}
	r.m.calls.WithLabelValues("claim", "error").Inc()
	return fmt.Errorf("identity: claim %s: unexpected reply %v", name, res)
}

// Admit decides whether a request (or a WebSocket open, or an open
// WebSocket's periodic renewal) of a guest token of holder for name may
// go on, and renews the claim; call it for every one. expires is the
// token's expiry (zero if unknown): nothing is cached, nor a claim given
// back, past it.
//
// In one script on the user's slot: a revoked holder (it signed out) is
// refused with ErrSignedOut; the holder's own claim is renewed for TTL; a
// free name is taken back for the holder (SET NX) and the claim published
// — so a Redis that lost its data, or a claim that ran out while nobody
// wanted the name, costs nobody their session; a name another holder has
// is refused with ErrNotHolder. Refuse the token on either error. Other
// errors: names.ErrBadName (wrapped) for a bad name or holder id, or the
// Redis error.
//
// A holder this node signed out or heard of signing out is refused
// without asking Redis. Once started, and while the bus is Ready, an
// admission Redis confirmed less than TTL/4 ago is answered from memory:
// a chatty guest costs Redis one script per TTL/4 per node, and an idle
// one keeps its name between 3/4 TTL and TTL after its last request. That
// cache never outlives what the node hears: every event of the user drops
// it, a resubscription drops all of it, and while the bus is not Ready it
// is not used (see the package doc for the one window left).
func (r *Registry) Admit(ctx context.Context, name, holder string, expires time.Time) error {
	return r.AdmitMany(ctx, []Admission{{Name: name, Holder: holder, Expires: expires}})[0]
}

// admitArgs are claim_admit.lua's arguments for c.
func (r *Registry) admitArgs(c claimant, now time.Time, ttl time.Duration) []any {
	return []any{c.holder, ttl.Milliseconds(), now.UnixMilli(), r.Channel(),
		encodeEvent(Event{Type: EventClaimed, User: c.user, Holder: c.holder})}
}

// admitReply is Admit's answer to claim_admit.lua's reply (res, err) for
// c, asked at now with the cache's generation gen.
func (r *Registry) admitReply(c claimant, name string, now, expires time.Time, gen uint64, res []any, err error) error {
	code, until, err := scriptReply(res, err)
	if err != nil {
		r.m.calls.WithLabelValues("admit", "error").Inc()
		return fmt.Errorf("identity: admit %s: %w", name, err)
	}
	switch code {
	case 1, 2:
		result := "renewed"
		if code == 2 {
			result = "taken_back"
		}
		r.m.calls.WithLabelValues("admit", result).Inc()
		r.confirm(c, name, now, expires, gen)
		return nil
	case 0:
		r.m.calls.WithLabelValues("admit", "not_holder").Inc()
		r.mu.Lock()
		r.mem.drop(c)
		r.mu.Unlock()
		return fmt.Errorf("identity: admit %s: %w", name, ErrNotHolder)
	case -1:
		r.m.calls.WithLabelValues("admit", "signed_out").Inc()
		r.learnRevoked(c, until, now)
		return fmt.Errorf("identity: admit %s: %w", name, ErrSignedOut)
	}
	r.m.calls.WithLabelValues("admit", "error").Inc()
	return fmt.Errorf("identity: admit %s: unexpected reply %v", name, res)
}

// Admission is one guest token to admit: its name, holder id and expiry,
// as Admit takes them.
type Admission struct {
	Name, Holder string
	Expires      time.Time
}

// admitBatch is how many admissions AdmitMany sends in one pipeline: what
// a pipeline holds, Redis runs back to back (at about 20 µs a script, a
// batch keeps other clients waiting for about a millisecond), and the
// round trips fall 64-fold.
const admitBatch = 64

// AdmitMany is Admit for each of as, answered in order: each error is the
// one Admit would have returned. Admissions the node can answer (a holder
// it knows signed out, a claim confirmed less than TTL/4 ago) cost Redis
// nothing; the others go in pipelines of admitBatch scripts, one round
// trip each, rather than one round trip an admission. A node renewing
// the names of all its connections (realtime/chat's presence tick) calls
// it: one at a time, 6,000 of them were 6,000 round trips on one
// goroutine, about a second of it on a busy host, and 100,000 more than a
// presence tick. Admissions of one holder for one name (a guest's two
// tabs: their connections are renewed in the same tick) ask Redis once,
// and each is answered that script's reply, as Admit would have answered
// it: the second script would only have renewed the claim again.
func (r *Registry) AdmitMany(ctx context.Context, as []Admission) []error {
	errs := make([]error, len(as))
	type ask struct {
		is  []int // the admissions of c in as, answered its reply
		c   claimant
		cmd *redis.Cmd
	}
	var asks []ask
	asked := map[claimant]int{} // an ask's place in asks
	now, ttl := r.now(), r.TTL()
	r.mu.Lock()
	live := r.liveLocked()
	gen := r.mem.gen
	for i, a := range as {
		if err := check(a.Name, a.Holder); err != nil {
			errs[i] = fmt.Errorf("identity: admit: %w", err)
			continue
		}
		c := claimant{names.Canonical(a.Name), a.Holder}
		switch {
		case r.mem.isRevoked(c, now):
			r.m.calls.WithLabelValues("admit", "signed_out_local").Inc()
			errs[i] = fmt.Errorf("identity: admit %s: %w", a.Name, ErrSignedOut)
		case live && r.mem.cached(c, now, a.Expires, ttl/4):
			r.m.calls.WithLabelValues("admit", "cached").Inc()
		default:
			if k, ok := asked[c]; ok {
				asks[k].is = append(asks[k].is, i)
				continue
			}
			asked[c] = len(asks)
			asks = append(asks, ask{is: []int{i}, c: c})
		}
	}
	r.mu.Unlock()
	for len(asks) > 0 {
		batch := asks[:min(len(asks), admitBatch)]
		asks = asks[len(batch):]
		_ = redisx.Pipelined(ctx, r.rdb, func(p *redisx.Pipe) {
			for k := range batch {
				b := &batch[k]
				b.cmd = p.Script(claimAdmitScript, r.keys(b.c.user), r.admitArgs(b.c, now, ttl)...)
			}
		})
		for _, b := range batch {
			res, err := b.cmd.Slice()
			for _, i := range b.is {
				a := as[i]
				errs[i] = r.admitReply(b.c, a.Name, now, a.Expires, gen, res, err)
			}
		}
	}
	return errs
}

// Release signs holder out of name: in one script on the user's slot it
// deletes the claim if holder has it (compare-and-delete, so a holder
// whose claim ran out and was taken cannot free the other's name),
// records holder as revoked until expires (the token's expiry), and
// publishes the sign-out, on which every node drops what it cached of the
// holder, remembers the revocation, and calls OnEnded. From then on no
// token of holder is admitted anywhere until expires, even after Redis
// lost its data (see the package doc). This node refuses the holder from
// the moment Release is called, even when Redis then fails. Release
// succeeds whether or not holder had the claim (the sign-out is the
// revocation). It returns ErrBadExpiry for a zero expires,
// names.ErrBadName (wrapped) for a bad name or holder id, or the Redis
// error (then call it again: it is idempotent).
func (r *Registry) Release(ctx context.Context, name, holder string, expires time.Time) error {
	if err := check(name, holder); err != nil {
		return fmt.Errorf("identity: release: %w", err)
	}
	if expires.IsZero() {
		return fmt.Errorf("identity: release %s: %w", name, ErrBadExpiry)
	}
	c := claimant{names.Canonical(name), holder}
	now := r.now()
	until := expires.UTC().Truncate(time.Millisecond)
	r.revokeLocal(c, until, now)
	res, err := releaseScript.Run(ctx, r.rdb, r.keys(c.user), holder, until.UnixMilli(), now.UnixMilli(),
		r.Channel(), encodeEvent(Event{Type: EventSignedOut, User: c.user, Holder: holder, Until: until})).Int64()
	if err != nil {
		r.m.calls.WithLabelValues("release", "error").Inc()
		return fmt.Errorf("identity: release %s: %w", name, err)
	}
	if res == 1 {
		r.m.calls.WithLabelValues("release", "released").Inc()
	} else {
		r.m.calls.WithLabelValues("release", "revoked").Inc()
	}
	return nil
}

// Holder returns the holder of name (in its canonical form) and when its
// claim ends unless renewed (by this Registry's clock); holder is "" and
// until zero when the name is free. It returns names.ErrBadName (wrapped)
// for a bad name, or the Redis error.
func (r *Registry) Holder(ctx context.Context, name string) (holder string, until time.Time, err error) {
	if err := names.User(name); err != nil {
		return "", time.Time{}, fmt.Errorf("identity: holder: %w", err)
	}
	res, err := readScript.Run(ctx, r.rdb, []string{claimKey(r.space, names.Canonical(name))}).Slice()
	if errors.Is(err, redis.Nil) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("identity: holder %s: %w", name, err)
	}
	if len(res) != 2 {
		return "", time.Time{}, fmt.Errorf("identity: holder %s: unexpected reply %v", name, res)
	}
	holder, ok1 := res[0].(string)
	pttl, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return "", time.Time{}, fmt.Errorf("identity: holder %s: unexpected reply %v", name, res)
	}
	if pttl < 0 { // no TTL: written by something else than this package
		return holder, time.Time{}, nil
	}
	return holder, r.now().Add(time.Duration(pttl) * time.Millisecond), nil
}

// keys are the keys of user's claim scripts, in their KEYS order.
func (r *Registry) keys(user string) []string {
	return []string{claimKey(r.space, user), revokedKey(r.space, user)}
}

// confirm remembers that Redis confirmed c's claim at now; the admission
// may be served from the cache only if no event or resubscription came
// while the script ran (gen is what it was before).
func (r *Registry) confirm(c claimant, display string, now, expires time.Time, gen uint64) {
	r.mu.Lock()
	evicted := r.mem.confirm(c, display, now, expires, gen == r.mem.gen)
	r.mem.sweep(now, r.TTL(), r.TTL()/4)
	r.mu.Unlock()
	r.m.evictions.WithLabelValues("admits").Add(float64(evicted))
}

// revokeLocal remembers c as revoked until until.
func (r *Registry) revokeLocal(c claimant, until, now time.Time) {
	r.mu.Lock()
	evicted := r.mem.revoke(c, until, now)
	r.mem.sweep(now, r.TTL(), r.TTL()/4)
	r.mu.Unlock()
	r.m.evictions.WithLabelValues("revocations").Add(float64(evicted))
}

// learnRevoked remembers a revocation Redis told of (until in unix ms, as
// the script answered it).
func (r *Registry) learnRevoked(c claimant, until string, now time.Time) {
	ms, err := strconv.ParseFloat(until, 64)
	if err != nil {
		return
	}
	r.revokeLocal(c, time.UnixMilli(int64(ms)), now)
}

// scriptReply reads a claim script's {code[, until]} reply.
func scriptReply(res []any, err error) (code int64, until string, _ error) {
	if err != nil {
		return 0, "", err
	}
	if len(res) == 0 {
		return 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	code, ok := res[0].(int64)
	if !ok {
		return 0, "", fmt.Errorf("unexpected reply %v", res)
	}
	if len(res) > 1 {
		until, _ = res[1].(string)
	}
	return code, until, nil
}

// check validates a name and a holder id: 1–MaxSessionLen of
// [A-Za-z0-9_-].
func check(name, holder string) error {
	if err := names.User(name); err != nil {
		return err
	}
	return checkHolder(holder)
}

func checkHolder(holder string) error {
	if holder == "" || len(holder) > MaxSessionLen {
		return fmt.Errorf("%w: holder id must have 1-%d characters", names.ErrBadName, MaxSessionLen)
	}
	for i := 0; i < len(holder); i++ {
		c := holder[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: holder id may only hold A-Z a-z 0-9 _ -", names.ErrBadName)
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
