package dirty

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// Config configures a Tracker.
type Config struct {
	// Prefix is the key and channel prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// Node names this node's wake channel; "" = random. Use the node id.
	Node string
	// SessionTTL is how long a session lives without an Open; 0 = 10m.
	SessionTTL time.Duration
	// FollowTTL is how long a Follow lasts without being repeated; 0 = 7 days.
	FollowTTL time.Duration
	// MaxSessionsPerUser caps a user's session index (what MarkUsers
	// reaches): an Open past it drops the user's sessions renewed longest
	// ago from the index and from the live set; 0 = DefaultMaxSessionsPerUser.
	MaxSessionsPerUser int
	// MaxFollows caps the topics a user follows: a Follow past it drops the
	// topic followed longest ago; 0 = DefaultMaxFollows.
	MaxFollows int
	// Batch is how many sessions one MarkAll/MarkSessions pipeline marks;
	// 0 = 500.
	Batch int
	// Now is the clock of session expiry scores and of Open's renewal
	// throttle; nil = time.Now. Redis TTLs run on the server's clock.
	Now func() time.Time
	// Logger receives wake-channel events; nil = slog.Default().
	Logger *slog.Logger
	// Registerer registers the dirty metrics; nil = none.
	Registerer prometheus.Registerer
}

// Defaults of the caps in Config.
const (
	// DefaultMaxSessionsPerUser is Config.MaxSessionsPerUser's default.
	DefaultMaxSessionsPerUser = 10
	// DefaultMaxFollows is Config.MaxFollows's default.
	DefaultMaxFollows = 100
)

// Tracker keeps the per-session dirty bitmasks of REST pollers. It is safe
// for concurrent use. Producers call the Mark methods; the poll handler calls
// Open then Take or Wait.
type Tracker struct {
	rdb     redis.UniversalClient
	k       keys
	channel string
	ttl     time.Duration
	follow  time.Duration
	batch   int
	maxSess int
	maxFol  int
	now     func() time.Time
	log     *slog.Logger
	metrics metrics

	renewed renewals
	waiters *waiterSet

	startMu sync.Mutex
	sub     *bus.Subscription
	started atomic.Bool
}

// New returns a Tracker over rdb. Call Start before Wait.
func New(rdb redis.UniversalClient, cfg Config) *Tracker {
	if cfg.Node == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		cfg.Node = hex.EncodeToString(b[:])
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 10 * time.Minute
	}
	if cfg.FollowTTL <= 0 {
		cfg.FollowTTL = 7 * 24 * time.Hour
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.MaxSessionsPerUser <= 0 {
		cfg.MaxSessionsPerUser = DefaultMaxSessionsPerUser
	}
	if cfg.MaxFollows <= 0 {
		cfg.MaxFollows = DefaultMaxFollows
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	k := keys{ks: keyspace.New(cfg.Prefix)}
	t := &Tracker{
		rdb:     rdb,
		k:       k,
		channel: k.wakeChannel(cfg.Node),
		ttl:     cfg.SessionTTL,
		follow:  cfg.FollowTTL,
		batch:   cfg.Batch,
		maxSess: cfg.MaxSessionsPerUser,
		maxFol:  cfg.MaxFollows,
		now:     cfg.Now,
		log:     cfg.Logger.With("component", "dirty", "node", cfg.Node),
		metrics: newMetrics(cfg.Registerer),
		renewed: renewals{every: cfg.SessionTTL / 12},
		waiters: newWaiterSet(),
	}
	return t
}

// Open starts session for user, or renews it. A session id belongs to one
// user for its life: derive it from the signed token. A new session (never
// seen, or expired) starts with every section dirty, so its first poll
// returns the full state, and created is true. Call it on every poll, before
// Take or Wait: a renewal costs one pipelined round trip, and this node sends
// it at most once per SessionTTL/4 per session, so most polls pay nothing for
// it.
//
// The user's session index keeps Config.MaxSessionsPerUser sessions: when
// this one is one too many, the sessions renewed longest ago are dropped
// from the index by the same script (MarkUsers no longer reaches them) and
// then from the live set (nor MarkAll) in one more round trip (logged, not
// returned, when it fails: a Sweep trims them later); their own keys expire
// by the session TTL. A dropped session that still polls is
// added back by its next renewal, dropping the next oldest in turn.
//
// It returns an error wrapping ErrBadID or names.ErrBadName for bad input,
// or the Redis error.
func (t *Tracker) Open(ctx context.Context, session, user string) (created bool, err error) {
	if err := checkID("session", session); err != nil {
		return false, fmt.Errorf("dirty: open: %w", err)
	}
	if err := names.User(user); err != nil {
		return false, fmt.Errorf("dirty: open: %w", err)
	}
	now := t.now()
	if t.renewed.fresh(now, session, user) {
		return false, nil
	}
	exp := now.Add(t.ttl).UnixMilli()
	var open, index *redis.Cmd
	err = redisx.Pipelined(ctx, t.rdb, func(p *redisx.Pipe) {
		args := append([]any{user, t.ttl.Milliseconds()}, AllSections.offsets()...)
		open = p.Script(openScript, []string{t.k.owner(session), t.k.mask(session), t.k.cursor(session)}, args...)
		index = p.Script(indexScript, []string{t.k.userSessions(user)}, now.UnixMilli(), exp, t.ttl.Milliseconds(), t.maxSess, session)
		p.ZAdd(ctx, t.k.liveSessions(), redis.Z{Score: float64(exp), Member: session})
	})
	if err != nil {
		return false, fmt.Errorf("dirty: open %s: %w", session, err)
	}
	t.renewed.put(now, session, user)
	created = open.Val() == int64(1)
	if created {
		t.metrics.opened.Inc()
	}
	if dropped := stringsOf(index.Val()); len(dropped) > 0 {
		t.metrics.droppedSessions.Add(float64(len(dropped)))
		members := make([]any, len(dropped))
		for i, s := range dropped {
			members[i] = s
		}
		if err := t.rdb.ZRem(ctx, t.k.liveSessions(), members...).Err(); err != nil {
			// Open itself succeeded, so the poll goes on: the dropped
			// sessions stay in the live set until their expiry score
			// passes and a Sweep or MarkAll trims them.
			t.log.Warn("dropping sessions from the live set", "user", user, "sessions", len(dropped), "err", err)
		}
	}
	return created, nil
}

// stringsOf returns the strings of a script's array reply.
func stringsOf(v any) []string {
	vals, _ := v.([]any)
	out := make([]string, 0, len(vals))
	for _, x := range vals {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Take reads and clears the session's dirty mask in one atomic step (the wait
// script, lua/session_wait.lua, whose [GETDEL] takes the mask): a mark that
// lands after it stays for the next Take, never lost. The script records the
// mask it took for redisx.CallRecordTTL under a key of this call, so that
// go-redis' retry of the call (sent when the reply is late; the first copy
// may have run) answers the same mask instead of finding none: the call's
// context ends redisx.CallBound after it started at the latest, so no retry
// is sent after the record may have lapsed. An unknown or expired session is
// clean. It returns an error wrapping ErrBadID for a bad id, or the Redis
// error.
//
// [GETDEL]: https://redis.io/commands/getdel/
func (t *Tracker) Take(ctx context.Context, session string) (Mask, error) {
	if err := checkID("session", session); err != nil {
		return 0, fmt.Errorf("dirty: take: %w", err)
	}
	m, err := t.take(ctx, session, "", 0)
	if err != nil {
		return 0, fmt.Errorf("dirty: take %s: %w", session, err)
	}
	t.metrics.take(m)
	return m, nil
}

// A take's record (keys.taken) is kept redisx.CallRecordTTL: about 100
// bytes of Redis memory per dirty take for that long; a clean take records
// nothing.

// take runs the wait script once: it takes session's mask, or, when it is
// clean and channel is not "", registers a long poll on channel for reg. The
// call is keyed by a new nonce (keys.taken) and its context ends
// redisx.CallBound from now at the latest.
func (t *Tracker) take(ctx context.Context, session, channel string, reg time.Duration) (Mask, error) {
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	keys := []string{t.k.mask(session), t.k.waiters(session), t.k.taken(session, redisx.CallID())}
	b, err := waitScript.Run(ctx, t.rdb, keys, channel, reg.Milliseconds(), redisx.CallRecordTTL.Milliseconds()).Text()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	return parseBitmap(b), nil
}

// MarkSessions makes bits dirty in each live session and wakes their long
// polls, in pipelines of Config.Batch sessions (one round trip for up to a
// batch). Sessions that are not live are skipped. It returns an error
// wrapping ErrBadID for a bad id, before marking anything.
func (t *Tracker) MarkSessions(ctx context.Context, sessions []string, bits Mask) error {
	for _, s := range sessions {
		if err := checkID("session", s); err != nil {
			return fmt.Errorf("dirty: mark: %w", err)
		}
	}
	if bits == 0 || len(sessions) == 0 {
		return nil
	}
	if err := t.mark(ctx, sessions, bits); err != nil {
		return fmt.Errorf("dirty: mark %d sessions %s: %w", len(sessions), bits, err)
	}
	return nil
}

// mark marks valid sessions in batched pipelines.
func (t *Tracker) mark(ctx context.Context, sessions []string, bits Mask) error {
	offsets := bits.offsets()
	ttl := t.ttl.Milliseconds()
	for len(sessions) > 0 {
		n := min(len(sessions), t.batch)
		batch := sessions[:n]
		sessions = sessions[n:]
		cmds := make([]*redis.Cmd, 0, len(batch))
		err := redisx.Pipelined(ctx, t.rdb, func(p *redisx.Pipe) {
			for _, s := range batch {
				args := append([]any{ttl, s}, offsets...)
				cmds = append(cmds, p.Script(markScript, []string{t.k.owner(s), t.k.mask(s), t.k.waiters(s)}, args...))
			}
		})
		if err != nil {
			return err
		}
		for _, c := range cmds {
			if c.Val() == int64(1) {
				t.metrics.marked.Inc()
			}
		}
	}
	return nil
}

// MarkUsers makes bits dirty in every live session of users: one pipelined
// round trip reads their sessions, one marks them (more for more than
// Config.Batch sessions). It returns an error wrapping names.ErrBadName for a
// bad user name, before marking anything.
func (t *Tracker) MarkUsers(ctx context.Context, users []string, bits Mask) error {
	for _, u := range users {
		if err := names.User(u); err != nil {
			return fmt.Errorf("dirty: mark users: %w", err)
		}
	}
	if bits == 0 || len(users) == 0 {
		return nil
	}
	sessions, err := t.sessionsOf(ctx, users)
	if err != nil {
		return fmt.Errorf("dirty: mark %d users %s: %w", len(users), bits, err)
	}
	if err := t.mark(ctx, sessions, bits); err != nil {
		return fmt.Errorf("dirty: mark %d users %s: %w", len(users), bits, err)
	}
	return nil
}

// sessionsOf returns the live sessions of users, in one pipeline.
func (t *Tracker) sessionsOf(ctx context.Context, users []string) ([]string, error) {
	min := "(" + strconv.FormatInt(t.now().UnixMilli(), 10)
	cmds, err := t.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, u := range users {
			pipe.ZRangeByScore(ctx, t.k.userSessions(u), &redis.ZRangeBy{Min: min, Max: "+inf"})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var sessions []string
	seen := map[string]bool{}
	for _, c := range cmds {
		for _, s := range c.(*redis.StringSliceCmd).Val() {
			if !seen[s] && checkID("session", s) == nil {
				seen[s] = true
				sessions = append(sessions, s)
			}
		}
	}
	return sessions, nil
}

// MarkAll makes bits dirty in every live session (a setting changed, a
// notice was posted): it trims expired sessions (as Sweep does), then walks
// the live set with [ZSCAN] and marks each page in one pipeline of up to
// Config.Batch sessions. A session opened during the walk may be missed; it
// starts all dirty anyway. It returns the Redis error.
//
// [ZSCAN]: https://redis.io/commands/zscan/
func (t *Tracker) MarkAll(ctx context.Context, bits Mask) error {
	if bits == 0 {
		return nil
	}
	key := t.k.liveSessions()
	now := t.now().UnixMilli()
	if _, err := t.sweep(ctx, now); err != nil {
		return fmt.Errorf("dirty: mark all %s: %w", bits, err)
	}
	var cursor uint64
	seen := map[string]bool{}
	for {
		page, next, err := t.rdb.ZScan(ctx, key, cursor, "", int64(t.batch)).Result()
		if err != nil {
			return fmt.Errorf("dirty: mark all %s: %w", bits, err)
		}
		var sessions []string
		for i := 0; i+1 < len(page); i += 2 {
			s := page[i]
			exp, _ := strconv.ParseFloat(page[i+1], 64)
			if int64(exp) > now && !seen[s] && checkID("session", s) == nil {
				seen[s] = true
				sessions = append(sessions, s)
			}
		}
		if err := t.mark(ctx, sessions, bits); err != nil {
			return fmt.Errorf("dirty: mark all %s: %w", bits, err)
		}
		cursor = next
		if cursor == 0 {
			return nil
		}
	}
}

// Sweep removes from the live set (the global index MarkAll walks) every
// session whose expiry score has passed: one [ZREMRANGEBYSCORE]. Opens add
// to that set and only Sweep and MarkAll trim it, so a node calls Sweep
// periodically (every minute, or SessionTTL/4, whichever is shorter); then
// the set holds the sessions opened or renewed within SessionTTL plus at
// most one period of expired ones. It returns how many it removed, or the
// Redis error.
//
// [ZREMRANGEBYSCORE]: https://redis.io/commands/zremrangebyscore/
func (t *Tracker) Sweep(ctx context.Context) (removed int, err error) {
	n, err := t.sweep(ctx, t.now().UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("dirty: sweep: %w", err)
	}
	return n, nil
}

// sweep trims the live set of sessions expired at now (unix ms).
func (t *Tracker) sweep(ctx context.Context, now int64) (int, error) {
	n, err := t.rdb.ZRemRangeByScore(ctx, t.k.liveSessions(), "-inf", strconv.FormatInt(now, 10)).Result()
	if err != nil {
		return 0, err
	}
	t.metrics.swept.Add(float64(n))
	return int(n), nil
}

// checkID checks a session or topic id before it becomes part of a key.
func checkID(kind, id string) error {
	if id == "" || len(id) > 256 {
		return fmt.Errorf("%w: %s id %q must be 1-256 bytes", ErrBadID, kind, clip(id))
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || c == '{' || c == '}' {
			return fmt.Errorf("%w: %s id %q holds a space, brace or non-printable byte", ErrBadID, kind, clip(id))
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// renewals remembers which sessions this node renewed recently, in two
// generations of at least every = SessionTTL/12 each: a session found in
// either was renewed less than 3 × every = SessionTTL/4 ago, so Open may
// skip Redis. Memory is bounded by the
// sessions polled here in the last SessionTTL/4.
type renewals struct {
	every time.Duration

	mu        sync.Mutex
	cur, prev map[string]string // session → user
	rotated   time.Time
}

func (r *renewals) rotate(now time.Time) {
	switch age := now.Sub(r.rotated); {
	case r.cur == nil || age >= 2*r.every || age < 0:
		r.cur, r.prev, r.rotated = map[string]string{}, map[string]string{}, now
	case age >= r.every:
		r.prev, r.cur, r.rotated = r.cur, map[string]string{}, now
	}
}

func (r *renewals) fresh(now time.Time, session, user string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now)
	if u, ok := r.cur[session]; ok {
		return u == user
	}
	u, ok := r.prev[session]
	return ok && u == user
}

func (r *renewals) put(now time.Time, session, user string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rotate(now)
	r.cur[session] = user
}
