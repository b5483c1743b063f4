package rooms

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/protocol"
)

// Messages carries what is said in the rooms: Send and SendMany append a
// message to its room's history and publish it on the room's channel in
// one script, rate limited by the sender's say bucket and idempotent by the
// say's key; History reads a room's history back; Remove deletes a message
// and PublishTyping publishes an ephemeral event. It owns each room's
// history, the say buckets, the idempotency records and claims, the global
// message counter (keys.go) and lua/message_send.lua,
// counter_add.lua and message_remove.lua; it reads the seat data of the
// sender's lobby in the send script. See the package doc, "messages",
// "idempotent says" and "durability".
type Messages struct {
	*base
	historyMax int
	idemTTL    time.Duration
	durability func() string
	waitFor    time.Duration // WAIT's timeout under DurabilityReplica

	hist refreshes // "lobby/seq" → when a send last refreshed its history's TTL
	q    sendQueue // SendMany calls waiting for the send commit in flight

	// claimSince is when SetClaimRecords last turned claim records on,
	// unix ms of Config.Now (at least 1); 0 while they are off.
	claimSince atomic.Int64
	// claimMarkRead is whether FollowClaimRecords has read the shared mark
	// since claim records last went on: the mark is set once and only
	// ever deleted, so once read it has nothing more to tell.
	claimMarkRead atomic.Bool

	// beforeCommit, when set (tests), runs in the committer before it
	// takes the waiting calls into its next commit.
	beforeCommit func()
}

// FeatureClaimRecords names what a node of this version understands and
// an older one does not: a keyed say's send record kept in the key's
// claim, in the user's slot, instead of in the lobby (SetClaimRecords). A
// node lists it in the registry (presence.Node.Features, Features).
const FeatureClaimRecords = "claim-records"

// Features is what this version of the package gives other nodes to rely
// on, for the registry.
func Features() []string { return []string{FeatureClaimRecords} }

// SetClaimRecords turns on (or off) keeping a keyed say's send record in
// its key's claim, on a Redis that is not a Cluster: one key a say instead
// of two, a new key with a TTL being the dearest write of a say. The send
// script reads records in both places (but see below). Turn it on only
// once every node that may answer a retried say reads records in claims
// (FeatureClaimRecords): an older chatd looks in the lobby only, so a say
// recorded in its claim and retried there would be stored twice. The
// realtime node does it from the registry at each heartbeat. A no-op on a
// Cluster, where the claim is taken in a round trip of its own and holds
// no record.
//
// Once claim records have been on for twice Config.IdempotencyTTL (on
// this node's clock, from the call that turned them on), the send script
// no longer reads a keyed say's record in the lobby when its claim is
// free: no node can have written one there that is still kept. The margin
// over one TTL covers the nodes that turned them on a heartbeat later.
func (s *Messages) SetClaimRecords(on bool) {
	if !on {
		s.claimSince.Store(0)
		s.claimMarkRead.Store(false)
		return
	}
	s.claimSince.CompareAndSwap(0, max(1, s.now().UnixMilli()))
}

// FollowClaimRecords is SetClaimRecords for a node that learns at each
// heartbeat whether every live node keeps records in claims (on), and
// shares with the other nodes, through a mark in Redis (claims_since.lua),
// since when that has been so: then a node that turns claim records on
// need not wait twice Config.IdempotencyTTL on its own clock when the
// deployment has been settled for longer, or has never stored a message
// (the global message counter does not exist: a new deployment, or a
// Redis that lost its data, records with it). Off deletes the mark, so
// that the next node to turn them on sets it afresh. Each call is at most
// one round trip: the mark is read once each time claim records go on
// (again at the next call when that failed), and not once they are
// settled here. A no-op on a Cluster, where claim records are never on.
func (s *Messages) FollowClaimRecords(ctx context.Context, on bool) error {
	if s.cluster {
		return nil
	}
	if !on {
		s.SetClaimRecords(false)
		if err := s.rdb.Del(ctx, claimsSinceKey(s.ks)).Err(); err != nil {
			return fmt.Errorf("rooms: claim records off: %w", err)
		}
		return nil
	}
	s.SetClaimRecords(true)
	if s.claimMarkRead.Load() || s.claimMode(s.now()) == "2" {
		return nil
	}
	keys := []string{claimsSinceKey(s.ks), messagesTotalKey(s.ks)}
	v, err := redisx.Run(ctx, s.rdb, claimsSinceScript, keys, s.now().UnixMilli()).Text()
	if err != nil {
		return fmt.Errorf("rooms: claim records since: %w", err)
	}
	since, err := strconv.ParseInt(v, 10, 64)
	if err != nil || since < 1 {
		return fmt.Errorf("rooms: claim records since: bad mark %q", v)
	}
	// Only ever earlier, and not if they were turned off meanwhile.
	for {
		cur := s.claimSince.Load()
		if cur == 0 {
			return nil
		}
		if since >= cur || s.claimSince.CompareAndSwap(cur, since) {
			s.claimMarkRead.Store(true)
			return nil
		}
	}
}

// claimMode is message_send.lua's ARGV[9] for a commit at now: "" for
// records in the lobby, "1" for records in claims, "2" once they have
// been for long enough that the lobby holds no keyed say's record.
func (s *Messages) claimMode(now time.Time) string {
	since := s.claimSince.Load()
	if s.cluster || since == 0 {
		return ""
	}
	if now.UnixMilli()-since > 2*s.idemTTL.Milliseconds() {
		return "2"
	}
	return "1"
}

// ClaimRecords reports whether SetClaimRecords turned claim records on.
func (s *Messages) ClaimRecords() bool { return s.claimSince.Load() != 0 }

// Channel returns the room's pub/sub channel, on which the seat and message
// scripts publish Events; "" for a malformed room id.
func (s *Messages) Channel(roomID string) string {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return ""
	}
	return channel(s.ks, lobby, seq)
}

// Message is a chat message, as docs/PROTOCOL.md shows it: the protocol's
// type (package protocol), so that the message event the send script
// publishes and every node forwards byte for byte is the one the protocol
// defines. Its ID is the message's stream id, zero-padded
// ("1700000000000-000003" style: 13 digits of ms, 6 of sequence), so the
// ids of one room sort in send order as strings; its JSON "ts" is RFC 3339
// with milliseconds, UTC.
type Message = protocol.Message

// formatID is the exposed, zero-padded form of stream id ms-seq.
func formatID(ms, seq uint64) string { return fmt.Sprintf("%013d-%06d", ms, seq) }

// parseID parses a message id, padded or as Redis writes it ("ms-seq",
// decimal digits only), into its stream id parts.
func parseID(s string) (ms, seq uint64, err error) {
	i := bytes.IndexByte([]byte(s), '-')
	if i <= 0 || i == len(s)-1 || len(s) > 64 {
		return 0, 0, fmt.Errorf("%w %q", ErrBadID, clip(s))
	}
	for _, part := range []string{s[:i], s[i+1:]} {
		for j := 0; j < len(part); j++ {
			if part[j] < '0' || part[j] > '9' {
				return 0, 0, fmt.Errorf("%w %q", ErrBadID, clip(s))
			}
		}
	}
	if ms, err = strconv.ParseUint(s[:i], 10, 64); err == nil {
		seq, err = strconv.ParseUint(s[i+1:], 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w %q", ErrBadID, clip(s))
	}
	return ms, seq, nil
}

// NormalizeID returns a message id in its padded form
// ("1796114764962-000001"), given it padded or as Redis writes stream ids
// ("1796114764962-1"), so that ids compare as strings in send order. It
// returns an error wrapping ErrBadID for anything else.
func NormalizeID(s string) (string, error) { return padID(s) }

// padID turns a stream id into a message id.
func padID(raw string) (string, error) {
	ms, seq, err := parseID(raw)
	if err != nil {
		return "", err
	}
	return formatID(ms, seq), nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// streamStart is the stream id before every message: History after it reads
// from the oldest message.
const streamStart = "0-0"

// Limits of History.
const (
	DefaultHistoryLimit = 100
	MaxHistoryLimit     = 1000
)

// History returns up to limit messages of the room, oldest first: the
// latest ones when after is "", else the ones sent after the message with
// id after (padded or as Redis writes it), from the oldest when after is
// "0-0" (the position before every message). limit <= 0 means
// DefaultHistoryLimit; it is capped at MaxHistoryLimit.
//
// It is one round trip: XRANGE from after itself, inclusive, so the reply
// proves after is still in the stream. It returns ErrResumeGap when it is
// not (trimmed, or Redis lost its data): messages may have been missed.
// It also returns ErrUnknownRoom, ErrBadID, names.ErrBadName, and Redis
// errors.
func (s *Messages) History(ctx context.Context, roomID, after string, limit int) ([]Message, error) {
	msgs, err := s.history(ctx, roomID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("rooms: history of %s after %q: %w", roomID, clip(after), err)
	}
	return msgs, nil
}

func (s *Messages) history(ctx context.Context, roomID, after string, limit int) ([]Message, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultHistoryLimit
	}
	limit = min(limit, MaxHistoryLimit)
	key := historyKey(s.ks, lobby, seq)
	var raw string
	if after != "" {
		ms, sq, err := parseID(after)
		if err != nil {
			return nil, err
		}
		raw = strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(sq, 10)
	}
	pipe := s.rdb.Pipeline()
	exists := pipe.ZScore(ctx, roomsKey(s.ks, lobby), strconv.Itoa(seq))
	var rng *redis.XMessageSliceCmd
	if raw == "" {
		rng = pipe.XRevRangeN(ctx, key, "+", "-", int64(limit))
	} else if raw == streamStart {
		rng = pipe.XRangeN(ctx, key, "-", "+", int64(limit))
	} else {
		rng = pipe.XRangeN(ctx, key, raw, "+", int64(limit)+1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	if errors.Is(exists.Err(), redis.Nil) {
		return nil, ErrUnknownRoom
	}
	entries := rng.Val()
	if raw == "" {
		slices.Reverse(entries)
	} else if raw == streamStart {
		// before the first message: nothing to prove
	} else {
		if len(entries) == 0 || entries[0].ID != raw {
			return nil, ErrResumeGap
		}
		entries = entries[1:]
	}
	out := make([]Message, 0, len(entries))
	for _, e := range entries {
		m, err := s.decodeEntry(roomID, e)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func (s *Messages) decodeEntry(roomID string, e redis.XMessage) (Message, error) {
	id, err := padID(e.ID)
	if err != nil {
		return Message{}, err
	}
	from, _ := e.Values["from"].(string)
	text, _ := e.Values["text"].(string)
	tsStr, _ := e.Values["ts"].(string)
	ts, err := strconv.ParseInt(tsStr, 10, 64)
	if err != nil {
		return Message{}, fmt.Errorf("history entry %s: ts %q: %w", e.ID, tsStr, err)
	}
	return Message{ID: id, Room: roomID, From: from, Text: text, TS: time.UnixMilli(ts).UTC()}, nil
}

// Counters returns the global counts of messages sent and rooms created,
// all lobbies, all nodes (0 before the first). It returns Redis errors.
func (s *Messages) Counters(ctx context.Context) (messages, rooms int64, err error) {
	pipe := s.rdb.Pipeline()
	m := pipe.Get(ctx, messagesTotalKey(s.ks))
	r := pipe.Get(ctx, roomsTotalKey(s.ks))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, fmt.Errorf("rooms: counters: %w", err)
	}
	count := func(c *redis.StringCmd) (int64, error) {
		n, err := c.Int64()
		if errors.Is(err, redis.Nil) {
			return 0, nil
		}
		return n, err
	}
	if messages, err = count(m); err == nil {
		rooms, err = count(r)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("rooms: counters: %w", err)
	}
	return messages, rooms, nil
}
