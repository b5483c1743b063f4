package moderation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Limits of the arguments.
const (
	// MaxDuration is the longest mute or ban: 31,536,000 seconds.
	MaxDuration = 365 * 24 * time.Hour
	// MaxReason is the longest reason, in bytes.
	MaxReason = 500
)

// Config configures a Service. The zero value is ready to use.
type Config struct {
	// Prefix is the key and channel prefix; "" means keyspace.DefaultPrefix.
	Prefix string
	// Now is the clock of the until times; nil means time.Now. The
	// sanctions themselves end by Redis's clock (a TTL of the duration).
	Now func() time.Time
	// Logger receives the audit line of every action; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Service mutes, bans and kicks users on every node. It is safe for
// concurrent use; make one per node and share it.
type Service struct {
	rdb redis.UniversalClient
	ks  keyspace.Space
	now func() time.Time
	log *slog.Logger
}

// New returns a Service keeping its data in rdb.
func New(rdb redis.UniversalClient, cfg Config) *Service {
	s := &Service{rdb: rdb, ks: keyspace.New(cfg.Prefix), now: cfg.Now, log: cfg.Logger}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Status is what Check found for a user.
type Status struct {
	Muted, Banned       bool
	MuteUntil, BanUntil time.Time // zero when not muted, not banned
	// Reason is the ban's reason when banned, else the mute's.
	Reason string
}

// Entry is one current mute or ban, as List gives them.
type Entry struct {
	User   string    `json:"user"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// sanction is the value of a mute or ban key.
type sanction struct {
	Until  int64  `json:"until"` // unix ms
	Reason string `json:"reason"`
}

// Channel returns the channel every action is published on (one for all
// nodes): subscribe to it and act on each Event (DecodeEvent).
func (s *Service) Channel() string { return eventsChannel(s.ks) }

// Mute mutes user for d: until it ends, Check reports Muted — for the user
// in any case ("Bob" is muted with "bob": sanctions, the listing and the
// events are keyed by the canonical name, names.Canonical). A new mute
// replaces the current one (a shorter one shortens it). The mute is one
// key whose TTL is d, written with the listing index in one pipelined round
// trip; a "mute" Event is then published. It returns the mute's end,
// ErrBadDuration, ErrBadReason, names.ErrBadName, and Redis errors, wrapped;
// after a Redis error the mute may or may not be in force: repeat it.
func (s *Service) Mute(ctx context.Context, user string, d time.Duration, reason string) (until time.Time, err error) {
	return s.impose(ctx, "mute", user, d, reason)
}

// Ban bans user for d, as Mute does for a mute: until it ends, Check
// reports Banned; the "ban" Event tells every node to close the user's
// connections (4003). It returns the ban's end, ErrBadDuration,
// ErrBadReason, names.ErrBadName, and Redis errors, wrapped.
func (s *Service) Ban(ctx context.Context, user string, d time.Duration, reason string) (until time.Time, err error) {
	return s.impose(ctx, "ban", user, d, reason)
}

// Unmute lifts user's mute at once (nothing when not muted) and publishes
// an "unmute" Event. It returns names.ErrBadName and Redis errors, wrapped.
func (s *Service) Unmute(ctx context.Context, user string) error {
	return s.lift(ctx, "unmute", "mute", user)
}

// Unban lifts user's ban at once (nothing when not banned) and publishes
// an "unban" Event. It returns names.ErrBadName and Redis errors, wrapped.
func (s *Service) Unban(ctx context.Context, user string) error {
	return s.lift(ctx, "unban", "ban", user)
}

// Kick publishes a "kick" Event: every node closes user's connections
// (4001 with the reason); nothing is stored, and the user may come back at
// once. It returns ErrBadReason, names.ErrBadName, and Redis errors, wrapped.
func (s *Service) Kick(ctx context.Context, user, reason string) error {
	err := names.User(user)
	if err == nil {
		err = checkReason(reason)
	}
	if err == nil {
		canon := names.Canonical(user)
		s.log.Info("moderation: kick", "action", "kick", "user", canon, "reason", reason)
		err = s.publish(ctx, Event{Type: "kick", User: canon, Reason: reason})
	}
	if err != nil {
		return fmt.Errorf("moderation: kick %s: %w", user, err)
	}
	return nil
}

// Check returns user's mute and ban (those of its canonical name) with
// one command (MGET of the two keys, which share a Cluster slot). It
// returns names.ErrBadName and Redis errors, wrapped.
func (s *Service) Check(ctx context.Context, user string) (Status, error) {
	if err := names.User(user); err != nil {
		return Status{}, fmt.Errorf("moderation: check %s: %w", user, err)
	}
	canon := names.Canonical(user)
	v, err := s.rdb.MGet(ctx, muteKey(s.ks, canon), banKey(s.ks, canon)).Result()
	if err != nil {
		return Status{}, fmt.Errorf("moderation: check %s: %w", user, err)
	}
	var st Status
	if m, ok := decodeSanction(v[0]); ok {
		st.Muted, st.MuteUntil, st.Reason = true, time.UnixMilli(m.Until).UTC(), m.Reason
	}
	if b, ok := decodeSanction(v[1]); ok {
		st.Banned, st.BanUntil, st.Reason = true, time.UnixMilli(b.Until).UTC(), b.Reason
	}
	return st, nil
}

// List returns the current mutes and bans (by canonical name), soonest
// end first, trimming the listing indexes of the ended ones in the same
// script. It returns Redis errors, wrapped.
func (s *Service) List(ctx context.Context) (mutes, bans []Entry, err error) {
	keys := []string{indexKey(s.ks, "mute"), reasonsKey(s.ks, "mute"), indexKey(s.ks, "ban"), reasonsKey(s.ks, "ban")}
	v, err := modListScript.Run(ctx, s.rdb, keys, s.now().UnixMilli()).Slice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("moderation: list: %w", err)
	}
	mutes, bans = entries(v[0]), entries(v[1])
	return mutes, bans, nil
}

func entries(v any) []Entry {
	flat, _ := v.([]any)
	out := make([]Entry, 0, len(flat)/3)
	for i := 0; i+2 < len(flat); i += 3 {
		user, _ := flat[i].(string)
		score, _ := flat[i+1].(string)
		reason, _ := flat[i+2].(string)
		ms, _ := strconv.ParseFloat(score, 64) // written by ZADD from unix ms
		out = append(out, Entry{User: user, Until: time.UnixMilli(int64(ms)).UTC(), Reason: reason})
	}
	return out
}

// impose writes a mute or ban (kind) and publishes its event.
func (s *Service) impose(ctx context.Context, kind, user string, d time.Duration, reason string) (time.Time, error) {
	err := names.User(user)
	if err == nil && (d < time.Second || d > MaxDuration) {
		err = fmt.Errorf("%w: %v", ErrBadDuration, d)
	}
	if err == nil {
		err = checkReason(reason)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("moderation: %s %s: %w", kind, user, err)
	}
	user = names.Canonical(user)
	until := s.now().Add(d).UTC().Truncate(time.Millisecond)
	val, _ := json.Marshal(sanction{Until: until.UnixMilli(), Reason: reason}) // cannot fail
	key := muteKey(s.ks, user)
	if kind == "ban" {
		key = banKey(s.ks, user)
	}
	s.log.Info("moderation: "+kind, "action", kind, "user", user, "seconds", d.Seconds(),
		"until", until.Format(time.RFC3339), "reason", reason)
	// The key is the sanction; the index only lists it. Both in one round
	// trip (two slots on a Cluster, so not atomic: a failure is returned
	// and the admin repeats the call, which is idempotent).
	pipe := s.rdb.Pipeline()
	pipe.Set(ctx, key, val, d)
	pipe.ZAdd(ctx, indexKey(s.ks, kind), redis.Z{Score: float64(until.UnixMilli()), Member: user})
	pipe.HSet(ctx, reasonsKey(s.ks, kind), user, reason)
	if _, err := pipe.Exec(ctx); err != nil {
		return time.Time{}, fmt.Errorf("moderation: %s %s: %w", kind, user, err)
	}
	// Published after the write: a node that reacts by calling Check sees it.
	if err := s.publish(ctx, Event{Type: kind, User: user, Until: until, Reason: reason}); err != nil {
		return time.Time{}, fmt.Errorf("moderation: %s %s: %w", kind, user, err)
	}
	return until, nil
}

// lift removes a mute or ban (kind) and publishes event.
func (s *Service) lift(ctx context.Context, event, kind, user string) error {
	if err := names.User(user); err != nil {
		return fmt.Errorf("moderation: %s %s: %w", event, user, err)
	}
	user = names.Canonical(user)
	key := muteKey(s.ks, user)
	if kind == "ban" {
		key = banKey(s.ks, user)
	}
	s.log.Info("moderation: "+event, "action", event, "user", user)
	pipe := s.rdb.Pipeline()
	pipe.Del(ctx, key)
	pipe.ZRem(ctx, indexKey(s.ks, kind), user)
	pipe.HDel(ctx, reasonsKey(s.ks, kind), user)
	_, err := pipe.Exec(ctx)
	if err == nil {
		err = s.publish(ctx, Event{Type: event, User: user})
	}
	if err != nil {
		return fmt.Errorf("moderation: %s %s: %w", event, user, err)
	}
	return nil
}

func (s *Service) publish(ctx context.Context, e Event) error {
	b, _ := json.Marshal(e) // cannot fail
	return s.rdb.Publish(ctx, eventsChannel(s.ks), b).Err()
}

func checkReason(r string) error {
	if len(r) > MaxReason || !utf8.ValidString(r) {
		return fmt.Errorf("%w (%d bytes)", ErrBadReason, len(r))
	}
	return nil
}

// decodeSanction decodes an MGET value; ok is false for a missing key (nil)
// or a value that is not a sanction.
func decodeSanction(v any) (sanction, bool) {
	str, ok := v.(string)
	if !ok {
		return sanction{}, false
	}
	var s sanction
	if err := json.Unmarshal([]byte(str), &s); err != nil {
		return sanction{}, false
	}
	return s, true
}
