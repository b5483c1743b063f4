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
//
// With Config.Durability "replica" the same pipeline ends with WAIT 1
// (Config.DurabilityTimeout): Send acks only a message that at least one
// replica holds. It returns an error wrapping ErrNotReplicated when none
// acknowledged it in time (or WAIT failed): the message was stored and
// published all the same, and the result is filled in along with the error
// (Message.ID says which), but a failover now may lose it.
func (s *Service) Send(ctx context.Context, roomID, user, text string, opt SendOptions) (SendResult, error) {
	r, err := s.send(ctx, roomID, user, text, opt)
	if err != nil && !errors.Is(err, ErrNotReplicated) {
		return SendResult{}, fmt.Errorf("rooms: send to %s as %s: %w", roomID, user, err)
	}
	s.m.sent.Inc()
	if err != nil {
		return r, fmt.Errorf("rooms: send to %s as %s: %w", roomID, user, err)
	}
	return r, nil
}

func (s *Service) send(ctx context.Context, roomID, user, text string, opt SendOptions) (SendResult, error) {
	out := s.sendMany(ctx, []SendRequest{{Room: roomID, User: user, Text: text}}, opt)
	return out[0].SendResult, out[0].Err
}

// SendRequest is one message of SendMany. Key is its idempotency key ("" =
// none).
type SendRequest struct{ Room, User, Text, Key string }

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
// for that message alone. With Config.Durability "replica" one WAIT follows
// the scripts on each connection (per room's master on a Redis Cluster), and
// a reply whose message no replica acknowledged carries its result and an
// error wrapping ErrNotReplicated, as Send.
func (s *Service) SendMany(ctx context.Context, reqs []SendRequest, opt SendOptions) []SendReply {
	out := s.sendMany(ctx, reqs, opt)
	for i := range out {
		if out[i].Err == nil || errors.Is(out[i].Err, ErrNotReplicated) {
			s.m.sent.Inc()
		}
		if out[i].Err != nil {
			out[i].Err = fmt.Errorf("rooms: send to %s as %s: %w", reqs[i].Room, reqs[i].User, out[i].Err)
		}
	}
	return out
}

type prepared struct {
	m     Message
	lobby string
	keys  []string
	args  []any
	cmd   *redis.Cmd
	wait  *redis.IntCmd // the WAIT behind cmd on its connection; nil without durability
	err   error
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
	return prepared{m: m, lobby: lobby,
		keys: []string{roomsKey(s.ks, lobby), seatsKey(s.ks, lobby, seq), historyKey(s.ks, lobby, seq),
			rateKey(s.ks, lobby, r.User), restKey(s.ks, lobby, seq)},
		args: []any{seq, r.User, now.UnixMilli(), s.historyMax, r.Text, channel(s.ks, lobby, seq), pre, post,
			s.publish, rate, burst},
	}
}

func (s *Service) sendMany(ctx context.Context, reqs []SendRequest, opt SendOptions) []SendReply {
	now := time.UnixMilli(s.now().UnixMilli()).UTC() // as History reads it back
	ps := make([]prepared, len(reqs))
	var live []int
	for i, r := range reqs {
		ps[i] = s.prepare(r, opt, now)
		if ps[i].err == nil {
			live = append(live, i)
		}
	}
	durable := s.durable()
	var incr *redis.IntCmd
	if len(live) > 0 {
		pipe := s.rdb.Pipeline()
		for _, i := range live {
			ps[i].cmd = messageSendScript.EvalSha(ctx, pipe, ps[i].keys, ps[i].args...)
		}
		if durable {
			s.queueWaits(ctx, pipe, ps, live)
		}
		incr = pipe.IncrBy(ctx, messagesTotalKey(s.ks), int64(len(live)))
		_, _ = pipe.Exec(ctx) // errors are read per command below
	}
	// A server without the script (restarted, or a replica just promoted)
	// answered NOSCRIPT and ran nothing: send those again with the source,
	// behind a WAIT of their own.
	var again []int
	for _, i := range live {
		if isNoScript(ps[i].cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := s.rdb.Pipeline()
		for _, i := range again {
			ps[i].cmd = messageSendScript.Eval(ctx, pipe, ps[i].keys, ps[i].args...)
		}
		if durable {
			s.queueWaits(ctx, pipe, ps, again)
		}
		_, _ = pipe.Exec(ctx)
	}
	out := make([]SendReply, len(reqs))
	refused := 0
	for i := range ps {
		p := &ps[i]
		if p.err != nil {
			out[i].Err = p.err
			continue
		}
		out[i].SendResult, out[i].Err = s.sendReply(p)
		if out[i].Err == nil && durable {
			out[i].Err = s.replicated(p)
		}
		if out[i].Err != nil && !errors.Is(out[i].Err, ErrNotReplicated) {
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

// Values of Config.Durability.
const (
	// DurabilityNone acks a message once its master stored it.
	DurabilityNone = "none"
	// DurabilityReplica acks a message once a replica holds it too (WAIT).
	DurabilityReplica = "replica"
)

// DefaultDurabilityTimeout is how long a send waits for a replica's
// acknowledgement when Config.DurabilityTimeout is 0.
const DefaultDurabilityTimeout = time.Second

func (s *Service) durable() bool {
	return s.durability != nil && s.durability() == DurabilityReplica
}

// queueWaits appends WAIT 1 <timeout> to pipe behind the send scripts of
// ps[idx], one per connection those scripts go out on, and points each
// prepared send at the WAIT that covers it.
//
// WAIT blocks until the replicas acknowledged every write made so far on
// its own connection, so it must follow the scripts on theirs. A single
// server or Sentinel pipeline is one connection: one WAIT at the end. A
// ClusterClient pipeline is one connection per master, chosen by each
// command's first key; WAIT has none, and go-redis would send it to any
// master. So on a Cluster each lobby (hash-tag unit, hence slot) of the
// batch gets a WAIT routed by the lobby's rooms key (slotWait).
func (s *Service) queueWaits(ctx context.Context, pipe redis.Pipeliner, ps []prepared, idx []int) {
	timeout := s.waitFor.Milliseconds()
	if _, cluster := s.rdb.(*redis.ClusterClient); !cluster {
		w := redis.NewIntCmd(ctx, "wait", 1, timeout)
		_ = pipe.Process(ctx, w)
		for _, i := range idx {
			ps[i].wait = w
		}
		return
	}
	byLobby := map[string]*redis.IntCmd{}
	for _, i := range idx {
		w, ok := byLobby[ps[i].lobby]
		if !ok {
			key := roomsKey(s.ks, ps[i].lobby)
			w = redis.NewIntCmd(ctx, "wait", 1, timeout, key)
			w.SetFirstKeyPos(3)
			_ = pipe.Process(ctx, slotWait{IntCmd: w, wire: []any{"wait", 1, timeout}})
			byLobby[ps[i].lobby] = w
		}
		ps[i].wait = w
	}
}

// slotWait is a WAIT that a ClusterClient pipeline sends to the master of
// a key's slot. Its IntCmd carries the key as a fourth argument at the
// first-key position, which go-redis reads to pick the node; Args, which
// go-redis writes to the wire, leave the key out. The reply lands in the
// IntCmd. rooms' tests check on a Cluster that the WAIT reaches the room's
// master (INFO commandstats), so a go-redis that routes otherwise fails
// them.
type slotWait struct {
	*redis.IntCmd
	wire []any
}

// Args are the arguments written to Redis: WAIT numreplicas timeout.
func (w slotWait) Args() []any { return w.wire }

// replicated returns nil when p's WAIT saw a replica acknowledge it, else
// an error wrapping ErrNotReplicated.
func (s *Service) replicated(p *prepared) error {
	if p.wait == nil {
		return fmt.Errorf("%w: no WAIT was sent", ErrNotReplicated)
	}
	n, err := p.wait.Result()
	switch {
	case err != nil:
		s.m.notReplicated.Inc()
		return fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	case n < 1:
		s.m.notReplicated.Inc()
		return fmt.Errorf("%w: no replica acknowledged within %v", ErrNotReplicated, s.waitFor)
	}
	return nil
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
