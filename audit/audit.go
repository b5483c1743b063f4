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
	// TTL is how long the log is kept after its last entry; 0 = 30 days.
	TTL time.Duration
	// Max is how many entries are kept, the newest; 0 = 1000.
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

// Log is the audit log. It is safe for concurrent use.
type Log struct {
	rdb redis.Cmdable
	key string
	ttl time.Duration
	max int
	now func() time.Time
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
	return &Log{rdb: rdb, key: logKey(keyspace.New(cfg.Prefix)), ttl: cfg.TTL, max: cfg.Max, now: cfg.Now}
}

// Record adds e, stamped now, as the newest entry: one MULTI/EXEC of
// LPUSH, LTRIM and PEXPIRE. It returns ErrBadEntry for an entry without
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
	_, err = l.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.LPush(ctx, l.key, b)
		p.LTrim(ctx, l.key, 0, int64(l.max-1))
		p.PExpire(ctx, l.key, l.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("audit: record %s: %w", e.Action, err)
	}
	return nil
}

// List returns the newest entries, at most limit (1 to MaxList; out of
// range is clamped), newest first. An entry that does not decode is
// skipped. It returns Redis errors.
func (l *Log) List(ctx context.Context, limit int) ([]Entry, error) {
	limit = min(max(limit, 1), MaxList)
	raw, err := l.rdb.LRange(ctx, l.key, 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("audit: list: %w", err)
	}
	out := make([]Entry, 0, len(raw))
	for _, s := range raw {
		var e Entry
		if json.Unmarshal([]byte(s), &e) == nil {
			out = append(out, e)
		}
	}
	return out, nil
}
