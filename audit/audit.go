package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
)

// Defaults of Config.
const (
	DefaultTTL = 30 * 24 * time.Hour
	DefaultMax = 1000
	// MaxList is the most entries List returns.
	MaxList = 1000
)

// ErrBadEntry is returned for an entry without an actor or an action.
var ErrBadEntry = errors.New("audit: an entry needs an actor and an action")

// Config configures a Log. The zero value is usable.
type Config struct {
	// Prefix namespaces the key; "" = "chatd".
	Prefix string
	// TTL is how long each list is kept after its last entry; 0 = 30 days.
	TTL time.Duration
	// Max is how many entries of each kind (actions, refusals) are kept,
	// the newest; 0 = 1000.
	Max int
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Entry is one admin action.
type Entry struct {
	// At is when the action was taken (set by Record).
	At time.Time `json:"at"`
	// Actor names the token that acted: its role and fingerprint
	// ("admin 3fa4c2d1").
	Actor string `json:"actor"`
	// Role is the token's role: "admin" (full) or "read" (read-only).
	Role string `json:"role"`
	// Action is what was asked: the method and the route ("POST
	// /moderation/mute").
	Action string `json:"action"`
	// Target is what the action was on (a user, a room, a setting); ""
	// when none.
	Target string `json:"target,omitempty"`
	// Detail summarises the request (a reason, a value), clipped.
	Detail string `json:"detail,omitempty"`
	// Status is the HTTP status it was answered with.
	Status int `json:"status"`
	// Node is the node that took it.
	Node string `json:"node"`
}

// RoleServer is the Role of an entry of a server API key (the
// application's backend): kept in a list of its own (Record).
const RoleServer = "server"

// Refused reports whether e records a refusal (answered 400 or more: a
// read-only token trying to act, a bad request) rather than an action.
// Refusals are kept in a list of their own, so no number of them evicts an
// action.
func (e Entry) Refused() bool { return e.Status >= 400 }

// Log is the audit log. It is safe for concurrent use.
type Log struct {
	rdb     redis.Cmdable
	key     string // actions
	refused string // refusals
	server  string // the server API keys' entries
	ttl     time.Duration
	max     int
	now     func() time.Time
}

// New returns the Log kept in rdb.
func New(rdb redis.Cmdable, cfg Config) *Log {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Max <= 0 {
		cfg.Max = DefaultMax
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ks := keyspace.New(cfg.Prefix)
	return &Log{rdb: rdb, key: logKey(ks), refused: refusedKey(ks), server: serverKey(ks), ttl: cfg.TTL, max: cfg.Max, now: cfg.Now}
}

// Record adds e, stamped now, as the newest entry of its kind: an action
// goes to the actions list, a refusal (Entry.Refused) to the refusals
// list, each capped at Config.Max entries, so refusals never push an
// action out; an entry of a server API key (Role RoleServer), action or
// refusal, to a third list, so a busy backend never pushes an admin's
// entry out. One MULTI/EXEC of LPUSH, LTRIM and PEXPIRE. It returns ErrBadEntry for an entry without
// an actor or an action, and Redis errors.
func (l *Log) Record(ctx context.Context, e Entry) error {
	if e.Actor == "" || e.Action == "" {
		return ErrBadEntry
	}
	e.At = l.now().UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("audit: record: %w", err)
	}
	key := l.key
	switch {
	case e.Role == RoleServer:
		key = l.server
	case e.Refused():
		key = l.refused
	}
	_, err = l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, key, b)
		p.LTrim(ctx, key, 0, int64(l.max-1))
		p.PExpire(ctx, key, l.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("audit: record %s: %w", e.Action, err)
	}
	return nil
}

// List returns the newest entries, actions, refusals and the server API
// keys' entries together, at most
// limit (1 to MaxList; out of range is clamped), newest first. An entry
// that does not decode is skipped. It returns Redis errors.
func (l *Log) List(ctx context.Context, limit int) ([]Entry, error) {
	limit = min(max(limit, 1), MaxList)
	var acts, refs, srv *redis.StringSliceCmd
	_, err := l.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		acts = p.LRange(ctx, l.key, 0, int64(limit-1))
		refs = p.LRange(ctx, l.refused, 0, int64(limit-1))
		srv = p.LRange(ctx, l.server, 0, int64(limit-1))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("audit: list: %w", err)
	}
	return merge(limit, decode(acts.Val()), decode(refs.Val()), decode(srv.Val())), nil
}

// merge merges newest-first lists, newest first, at most limit; on a tie
// the earlier list's entry first (an action before a refusal).
func merge(limit int, lists ...[]Entry) []Entry {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]Entry, 0, min(limit, n))
	for len(out) < limit {
		best := -1
		for i, l := range lists {
			if len(l) > 0 && (best < 0 || l[0].At.After(lists[best][0].At)) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		out, lists[best] = append(out, lists[best][0]), lists[best][1:]
	}
	return out
}

// decode decodes the entries of raw, skipping any that does not decode.
func decode(raw []string) []Entry {
	out := make([]Entry, 0, len(raw))
	for _, s := range raw {
		var e Entry
		if json.Unmarshal([]byte(s), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}
