package rooms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/names"
)

// Message is a chat message, as docs/PROTOCOL.md shows it. Its JSON form has
// "ts" in RFC 3339 with milliseconds, UTC.
type Message struct {
	// ID is the message's stream id, zero-padded ("1700000000000-000003"
	// style: 13 digits of ms, 6 of sequence), so the ids of one room sort
	// in send order as strings.
	ID   string    `json:"id"`
	Room string    `json:"room"`
	From string    `json:"from"`
	Text string    `json:"text"`
	TS   time.Time `json:"ts"`
}

// tsLayout is RFC 3339 with exactly three fraction digits.
const tsLayout = "2006-01-02T15:04:05.000Z07:00"

type messageJSON struct {
	ID   string `json:"id"`
	Room string `json:"room"`
	From string `json:"from"`
	Text string `json:"text"`
	TS   string `json:"ts"`
}

// MarshalJSON encodes m with its time as RFC 3339 with milliseconds, UTC.
func (m Message) MarshalJSON() ([]byte, error) {
	return json.Marshal(messageJSON{ID: m.ID, Room: m.Room, From: m.From, Text: m.Text, TS: m.TS.UTC().Format(tsLayout)})
}

// UnmarshalJSON decodes a message; "ts" must be RFC 3339.
func (m *Message) UnmarshalJSON(b []byte) error {
	var j messageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	ts, err := time.Parse(time.RFC3339Nano, j.TS)
	if err != nil {
		return fmt.Errorf("message ts: %w", err)
	}
	*m = Message{ID: j.ID, Room: j.Room, From: j.From, Text: j.Text, TS: ts}
	return nil
}

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

// SendOptions are the per-call knobs of Send.
type SendOptions struct {
	// Rate is the say rate allowed to the sender in the room's lobby, in
	// messages per second; 0 or less means no limit.
	Rate float64
	// Burst is how many says the sender may make at once after a pause
	// (the bucket's size); below 1 means 1.
	Burst float64
}

// SendResult is what Send did.
type SendResult struct {
	// Message is the message as stored and published.
	Message Message
	// HasREST is true when some user of the room is held there by a REST
	// attachment (the room's members to mark for polling): a superset, as
	// an expired REST attachment counts until its user's next renewal,
	// detach or reap.
	HasREST bool
}

// Send appends a message from user to the room's history and publishes it
// on the room's channel as an Event, in one script and one round trip: it
// checks that the user holds a live seat, takes a token from the user's
// say bucket (opt.Rate, opt.Burst), XADDs (MAXLEN ~ HistoryMax) and
// PUBLISHes (SPUBLISH with Config.ShardedPubSub), so the ids on the channel
// come in history order. The global message counter is INCRed in the same
// pipeline.
//
// The say bucket is per user per lobby, not per user: it lives in the
// lobby's hash-tag slot ({lobby:L}:rate:<user>) so that the check and the
// append are one script on one Redis Cluster shard; a user seated in two
// lobbies has two buckets.
//
// Send returns an error wrapping a *RateLimitError (errors.Is
// ErrRateLimited) when the bucket is empty — a refused say stores, publishes
// and counts nothing — ErrNotSeated, ErrUnknownRoom, ErrBadText,
// names.ErrBadName, and Redis errors (then nothing was sent). Length limits
// are the caller's.
func (s *Service) Send(ctx context.Context, roomID, user, text string, opt SendOptions) (SendResult, error) {
	r, err := s.send(ctx, roomID, user, text, opt)
	if err != nil {
		return SendResult{}, fmt.Errorf("rooms: send to %s as %s: %w", roomID, user, err)
	}
	s.m.sent.Inc()
	return r, nil
}

func (s *Service) send(ctx context.Context, roomID, user, text string, opt SendOptions) (SendResult, error) {
	out := s.sendMany(ctx, []SendRequest{{Room: roomID, User: user, Text: text}}, opt)
	return out[0].SendResult, out[0].Err
}

// SendRequest is one message of SendMany.
type SendRequest struct{ Room, User, Text string }

// SendReply is what SendMany did with one request: a result, or the error
// Send would have returned.
type SendReply struct {
	SendResult
	Err error
}

// SendMany sends several messages in one pipelined round trip, in order:
// the send scripts reach Redis in the order given (one connection; on a
// Redis Cluster the messages of one room share a slot, hence a node), so
// one client's says are stored in the order sent without each waiting for
// the previous one's answer. Each reply is what Send would have answered
// for that message alone.
func (s *Service) SendMany(ctx context.Context, reqs []SendRequest, opt SendOptions) []SendReply {
	out := s.sendMany(ctx, reqs, opt)
	for i := range out {
		if out[i].Err != nil {
			out[i].Err = fmt.Errorf("rooms: send to %s as %s: %w", reqs[i].Room, reqs[i].User, out[i].Err)
		} else {
			s.m.sent.Inc()
		}
	}
	return out
}

type prepared struct {
	m    Message
	keys []string
	args []any
	cmd  *redis.Cmd
	err  error
}

func (s *Service) prepare(r SendRequest, opt SendOptions, now time.Time) prepared {
	lobby, seq, err := ParseRoom(r.Room)
	if err == nil {
		err = names.User(r.User)
	}
	if err == nil && (r.Text == "" || !utf8.ValidString(r.Text)) {
		err = ErrBadText
	}
	if err != nil {
		return prepared{err: err}
	}
	m := Message{Room: r.Room, From: r.User, Text: r.Text, TS: now}
	pre, post, err := splitEvent(m)
	if err != nil {
		return prepared{err: err}
	}
	rate, burst := max(opt.Rate, 0), max(opt.Burst, 1)
	return prepared{m: m,
		keys: []string{roomsKey(s.ks, lobby), seatsKey(s.ks, lobby, seq), historyKey(s.ks, lobby, seq),
			rateKey(s.ks, lobby, r.User), restKey(s.ks, lobby, seq)},
		args: []any{seq, r.User, now.UnixMilli(), s.historyMax, r.Text, channel(s.ks, lobby, seq), pre, post,
			s.publish, rate, burst},
	}
}

func (s *Service) sendMany(ctx context.Context, reqs []SendRequest, opt SendOptions) []SendReply {
	now := time.UnixMilli(s.now().UnixMilli()).UTC() // as History reads it back
	ps := make([]prepared, len(reqs))
	pipe := s.rdb.Pipeline()
	n := 0
	for i, r := range reqs {
		ps[i] = s.prepare(r, opt, now)
		if ps[i].err == nil {
			ps[i].cmd = messageSendScript.EvalSha(ctx, pipe, ps[i].keys, ps[i].args...)
			n++
		}
	}
	var incr *redis.IntCmd
	if n > 0 {
		incr = pipe.IncrBy(ctx, messagesTotalKey(s.ks), int64(n))
		_, _ = pipe.Exec(ctx) // errors are read per command below
	}
	out := make([]SendReply, len(reqs))
	refused := 0
	for i := range ps {
		p := &ps[i]
		if p.err != nil {
			out[i].Err = p.err
			continue
		}
		if isNoScript(p.cmd.Err()) {
			p.cmd = messageSendScript.Run(ctx, s.rdb, p.keys, p.args...)
		}
		out[i].SendResult, out[i].Err = s.sendReply(p)
		if out[i].Err != nil {
			refused++
		}
	}
	if incr != nil && incr.Err() != nil {
		s.m.counterErrors.Inc()
	} else if refused > 0 { // counted messages that were not sent
		if err := s.rdb.DecrBy(ctx, messagesTotalKey(s.ks), int64(refused)).Err(); err != nil {
			s.m.counterErrors.Inc()
		}
	}
	return out
}

func (s *Service) sendReply(p *prepared) (SendResult, error) {
	v, err := p.cmd.Slice()
	if err != nil {
		return SendResult{}, err
	}
	if len(v) == 0 {
		return SendResult{}, errUnexpectedReply
	}
	if id, ok := v[0].(string); ok && len(v) == 2 {
		rest, _ := v[1].(int64)
		m := p.m
		m.ID, err = padID(id)
		return SendResult{Message: m, HasREST: rest > 0}, err
	}
	switch v[0] {
	case int64(0):
		return SendResult{}, ErrNotSeated
	case int64(-1):
		return SendResult{}, ErrUnknownRoom
	case int64(-2):
		wait := time.Millisecond
		if len(v) == 2 {
			if n, ok := v[1].(int64); ok && n > 1 {
				wait = time.Duration(n) * time.Millisecond
			}
		}
		return SendResult{}, &RateLimitError{RetryAfter: wait}
	}
	return SendResult{}, fmt.Errorf("%w %v", errUnexpectedReply, v)
}

// splitEvent encodes the message Event of m with an empty id and returns
// the bytes before and after the id, for message_send.lua to put the id in.
func splitEvent(m Message) (pre, post string, err error) {
	m.ID = ""
	b, err := json.Marshal(Event{Type: EventMessage, Message: &m})
	if err != nil {
		return "", "", err
	}
	// The message's id is the first "id" field of the event:
	// {"type":"message","message":{"id":"", ...
	const field = `"id":"`
	i := bytes.Index(b, []byte(field))
	if i < 0 {
		return "", "", fmt.Errorf("rooms: event without id field: %s", b)
	}
	i += len(field)
	return string(b[:i]), string(b[i:]), nil
}

// Limits of History.
const (
	DefaultHistoryLimit = 100
	MaxHistoryLimit     = 1000
)

// History returns up to limit messages of the room, oldest first: the
// latest ones when after is "", else the ones sent after the message with
// id after (padded or as Redis writes it). limit <= 0 means
// DefaultHistoryLimit; it is capped at MaxHistoryLimit.
//
// It is one round trip: XRANGE from after itself, inclusive, so the reply
// proves after is still in the stream. It returns ErrResumeGap when it is
// not (trimmed, or Redis lost its data): messages may have been missed.
// It also returns ErrUnknownRoom, ErrBadID, names.ErrBadName, and Redis
// errors.
func (s *Service) History(ctx context.Context, roomID, after string, limit int) ([]Message, error) {
	msgs, err := s.history(ctx, roomID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("rooms: history of %s after %q: %w", roomID, clip(after), err)
	}
	return msgs, nil
}

func (s *Service) history(ctx context.Context, roomID, after string, limit int) ([]Message, error) {
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

func (s *Service) decodeEntry(roomID string, e redis.XMessage) (Message, error) {
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
func (s *Service) Counters(ctx context.Context) (messages, rooms int64, err error) {
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
