package direct

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// MaxText is the longest direct message, in bytes.
const MaxText = 2000

// Config configures a Service. Every zero value has the default it names.
type Config struct {
	// Prefix namespaces the keys and the channel; "" = "chatd".
	Prefix string
	// Key makes conversation ids (ConversationID): every node must have
	// the same; nil = a plain SHA-256 of the pair, which anyone knowing both
	// names can compute (outsiders are refused all the same).
	Key []byte
	// HistoryMax caps a conversation's history (XADD MAXLEN ~); 0 = 1000.
	HistoryMax int
	// TTL is how long a conversation of two registered users lives after
	// its last message; 0 = 30 days.
	TTL time.Duration
	// GuestTTL is the same for a conversation a guest opened or wrote to,
	// and the life of a guest's blocks and list; 0 = 24 hours.
	GuestTTL time.Duration
	// BlocksTTL is how long a registered user's blocks live after their
	// last change (sign-outs do not touch them); 0 = 365 days.
	BlocksTTL time.Duration
	// SaidTTL is how long a send's idempotency key is remembered; 0 = 10 min.
	SaidTTL time.Duration
	// Opens is how many new conversations one user may open per
	// OpensWindow; 0 = 50, negative = no budget.
	Opens int
	// OpensWindow is the budget's window; 0 = 1 hour.
	OpensWindow time.Duration
	// MaxConversations is how many conversations a user's list keeps (the
	// most recent); 0 = 500.
	MaxConversations int
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Service is the direct-message store: conversations between two users,
// their histories, read marks and unread counts, each user's list of
// conversations by last activity, and blocks. It is safe for concurrent use.
type Service struct {
	rdb redis.UniversalClient
	ks  keyspace.Space
	cfg Config
	ch  string
}

// New returns the Service kept in rdb.
func New(rdb redis.UniversalClient, cfg Config) *Service {
	if cfg.HistoryMax <= 0 {
		cfg.HistoryMax = 1000
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 30 * 24 * time.Hour
	}
	if cfg.GuestTTL <= 0 {
		cfg.GuestTTL = 24 * time.Hour
	}
	if cfg.BlocksTTL <= 0 {
		cfg.BlocksTTL = 365 * 24 * time.Hour
	}
	if cfg.SaidTTL <= 0 {
		cfg.SaidTTL = 10 * time.Minute
	}
	if cfg.Opens == 0 {
		cfg.Opens = 50
	}
	if cfg.OpensWindow <= 0 {
		cfg.OpensWindow = time.Hour
	}
	if cfg.MaxConversations <= 0 {
		cfg.MaxConversations = 500
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ks := keyspace.New(cfg.Prefix)
	return &Service{rdb: rdb, ks: ks, cfg: cfg, ch: channel(ks)}
}

// Channel is the pub/sub channel every direct event is published on.
func (s *Service) Channel() string { return s.ch }

// idPrefix starts every conversation id; with 32 hex digits after it an id
// is 35 bytes, longer than any user name (32), so a path segment is either.
const idPrefix = "dm-"

// ConversationID returns the id of the conversation of users a and b: the
// same whichever is first and whatever the case of the names.
func (s *Service) ConversationID(a, b string) string {
	x, y := pair(a, b)
	msg := []byte(x + "\x00" + y)
	var sum []byte
	if len(s.cfg.Key) > 0 {
		m := hmac.New(sha256.New, s.cfg.Key)
		m.Write(msg)
		sum = m.Sum(nil)
	} else {
		h := sha256.Sum256(msg)
		sum = h[:]
	}
	return idPrefix + hex.EncodeToString(sum[:16])
}

// IsConversationID reports whether s has the form of a conversation id.
func IsConversationID(s string) bool {
	if len(s) != len(idPrefix)+32 || !strings.HasPrefix(s, idPrefix) {
		return false
	}
	_, err := hex.DecodeString(s[len(idPrefix):])
	return err == nil && strings.ToLower(s) == s
}

// pair returns the canonical names of a and b, lower first.
func pair(a, b string) (string, string) {
	a, b = names.Canonical(a), names.Canonical(b)
	if b < a {
		return b, a
	}
	return a, b
}

// Conversation is a conversation's record.
type Conversation struct {
	// ID is the conversation's id (ConversationID).
	ID string
	// A and B are the pair, as first written, A's canonical name lower.
	A, B string
	// Guest reports whether its keys live GuestTTL.
	Guest bool
}

// Peer returns the other one of the pair than user.
func (c Conversation) Peer(user string) string {
	if names.Canonical(c.A) == names.Canonical(user) {
		return c.B
	}
	return c.A
}

// Has reports whether user is one of the pair.
func (c Conversation) Has(user string) bool {
	u := names.Canonical(user)
	return names.Canonical(c.A) == u || names.Canonical(c.B) == u
}

// OpenOptions are Open's options.
type OpenOptions struct {
	// Guest: the opener is a guest (the conversation lives GuestTTL).
	Guest bool
}

// Open returns the conversation of from and to, making it when it does
// not exist (which spends one of from's Opens per OpensWindow) and adding
// it to both users' lists. It returns ErrSelf, names.ErrBadName, ErrBlocked
// when either blocks the other, a *RateLimitError when from's budget of
// new conversations is spent, and Redis errors.
func (s *Service) Open(ctx context.Context, from, to string, o OpenOptions) (Conversation, bool, error) {
	if err := names.User(to); err != nil {
		return Conversation{}, false, err
	}
	if names.Canonical(from) == names.Canonical(to) {
		return Conversation{}, false, ErrSelf
	}
	if err := s.CheckReach(ctx, from, to); err != nil {
		return Conversation{}, false, err
	}
	id := s.ConversationID(from, to)
	conv, err := s.Get(ctx, id)
	switch {
	case err == nil && (!o.Guest || conv.Guest):
		return conv, false, s.touch(ctx, conv, s.cfg.Now(), o.Guest)
	case err != nil && !errors.Is(err, ErrNoConversation):
		return Conversation{}, false, err
	case err != nil:
		if err := s.spendOpen(ctx, from); err != nil {
			return Conversation{}, false, err
		}
	}
	a, b := pair(from, to)
	an, bn := from, to
	if names.Canonical(from) != a {
		an, bn = to, from
	}
	// the call's id tells its own retry (a late call sent again) that it
	// made the record: created, and marked
	octx, cancel := redisx.BoundCall(ctx)
	res, err := redisx.Run(octx, s.rdb, conversationOpenScript, []string{metaKey(s.ks, id)},
		a, b, an, bn, flag(o.Guest), s.cfg.TTL.Milliseconds(), s.cfg.GuestTTL.Milliseconds(), redisx.CallID()).Int64Slice()
	cancel()
	if err != nil {
		return Conversation{}, false, fmt.Errorf("direct: open %s: %w", id, err)
	}
	conv, err = s.Get(ctx, id)
	if err != nil {
		return Conversation{}, false, err
	}
	return conv, res[0] == 1, s.touch(ctx, conv, s.cfg.Now(), o.Guest)
}

// spendOpen takes one new conversation of user's budget.
func (s *Service) spendOpen(ctx context.Context, user string) error {
	if s.cfg.Opens < 0 {
		return nil
	}
	k := opensKey(s.ks, names.Canonical(user))
	var n *redis.IntCmd
	var ttl *redis.DurationCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.Incr(ctx, k)
		p.ExpireNX(ctx, k, s.cfg.OpensWindow)
		ttl = p.PTTL(ctx, k)
		return nil
	})
	if err != nil {
		return fmt.Errorf("direct: budget of %s: %w", user, err)
	}
	if n.Val() > int64(s.cfg.Opens) {
		return &RateLimitError{What: "open", RetryAfter: max(ttl.Val(), time.Second)}
	}
	return nil
}

// touch puts conv at the top of both users' lists (scored at), trimmed to
// MaxConversations, with the conversation's life.
func (s *Service) touch(ctx context.Context, conv Conversation, at time.Time, guest bool) error {
	ttl := s.cfg.TTL
	if conv.Guest || guest {
		ttl = s.cfg.GuestTTL
	}
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, u := range []string{conv.A, conv.B} {
			k := convsKey(s.ks, names.Canonical(u))
			p.ZAddGT(ctx, k, redis.Z{Score: float64(at.UnixMilli()), Member: conv.ID})
			p.ZRemRangeByRank(ctx, k, 0, int64(-s.cfg.MaxConversations-1))
			p.PExpire(ctx, k, max(ttl, s.cfg.GuestTTL))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("direct: lists of %s: %w", conv.ID, err)
	}
	return nil
}

// Get returns conversation id's record, or ErrNoConversation.
func (s *Service) Get(ctx context.Context, id string) (Conversation, error) {
	if !IsConversationID(id) {
		return Conversation{}, ErrNoConversation
	}
	v, err := s.rdb.HMGet(ctx, metaKey(s.ks, id), "an", "bn", "guest").Result()
	if err != nil {
		return Conversation{}, fmt.Errorf("direct: get %s: %w", id, err)
	}
	an, _ := v[0].(string)
	bn, _ := v[1].(string)
	if an == "" || bn == "" {
		return Conversation{}, ErrNoConversation
	}
	g, _ := v[2].(string)
	return Conversation{ID: id, A: an, B: bn, Guest: g == "1"}, nil
}

// Message is one direct message.
type Message struct {
	// ID is its id in the conversation, "%013d-%06d" (a stream id padded:
	// ids compare as strings).
	ID string `json:"id"`
	// Conversation is the conversation's id.
	Conversation string `json:"conversation"`
	From         string `json:"from"`
	To           string `json:"to"`
	Text         string `json:"text"`
	// TS is when it was sent, unix ms.
	TS int64 `json:"ts"`
}

// SendOptions are Send's options.
type SendOptions struct {
	// Ref is the sender's idempotency key ("" = none): a send repeated
	// with it within SaidTTL returns the first message and changes nothing.
	Ref string
	// Rate and Burst are the sender's bucket in the conversation (messages
	// per second, at once); Rate <= 0 = no limit.
	Rate  float64
	Burst int
	// Guest: the sender is a guest.
	Guest bool
}

// Sent is what Send did.
type Sent struct {
	Message Message
	// Repeated reports a send answered from its idempotency key as
	// recorded by an earlier Send call (the client sent it again): nothing
	// was written or published this time. The Redis client's retry of this
	// call's own script, whose first run was applied, is not Repeated: it
	// is this call's send (see Send).
	Repeated bool
	// Unread is the recipient's unread count after it (0 when Repeated).
	Unread int64
}

// envelope is what the channel carries: the canonical names of the users
// to deliver to, a newline, then the event frame.
func envelope(users []string, frame string) string {
	return strings.Join(users, " ") + "\n" + frame
}

// DecodeEnvelope splits a payload of the channel into the canonical names
// it is for and the event frame to deliver to their connections.
func DecodeEnvelope(p []byte) (users []string, frame []byte, ok bool) {
	i := strings.IndexByte(string(p[:min(len(p), 80)]), '\n')
	if i <= 0 {
		return nil, nil, false
	}
	return strings.Fields(string(p[:i])), p[i+1:], true
}

// Send appends text from from to the conversation of from and to, which
// must exist (Open), counts it unread for to, moves the conversation to
// the top of both lists and publishes it to both users' connections (a
// "dm" event, eventJSON's fields). It returns ErrNoConversation,
// ErrTooLong, a *RateLimitError, ErrRefReused and Redis errors; the caller
// checks blocks and moderation first.
//
// The send is applied once however often the Redis client sends its
// script (a retry after a read timeout): it is recorded under o.Ref, or,
// without one, under a key of this call's own (kept
// redisx.CallRecordTTL), together with this call's id, and a second run
// answers the first one's message and unread count as this call's send
// (not Repeated). The script call ends redisx.CallBound after it starts
// at the latest, whatever ctx allows.
func (s *Service) Send(ctx context.Context, conv Conversation, from, text string, o SendOptions) (Sent, error) {
	if text == "" || len(text) > MaxText || !utf8.ValidString(text) {
		return Sent{}, ErrTooLong
	}
	if !conv.Has(from) {
		return Sent{}, ErrNoConversation
	}
	to := conv.Peer(from)
	now := s.cfg.Now()
	m := Message{Conversation: conv.ID, From: from, To: to, Text: text, TS: now.UnixMilli()}
	pre, post := eventParts(EventMessage, m)
	// The call's id is recorded with the message: it tells the Redis
	// client's retry of this call's script (the same id) from a client's
	// repeat. A send without a key is keyed by its call, for
	// redisx.CallRecordTTL: the retry is then answered by the first run's
	// record, not stored twice. Another call is another message.
	call := redisx.CallID()
	ref, ttl := o.Ref, s.cfg.SaidTTL
	if ref == "" {
		ref, ttl = "~"+call, redisx.CallRecordTTL
	}
	keys := []string{logKey(s.ks, conv.ID), metaKey(s.ks, conv.ID), rateKey(s.ks, conv.ID, names.Canonical(from)),
		saidKey(s.ks, conv.ID, names.Canonical(from), ref)}
	sum := sha256.Sum256([]byte(text))
	burst := max(o.Burst, 1)
	users := []string{names.Canonical(to), names.Canonical(from)}
	// no copy of the script call is sent once its record may be gone
	rctx, cancel := redisx.BoundCall(ctx)
	res, err := redisx.Run(rctx, s.rdb, messageSendScript, keys,
		names.Canonical(from), names.Canonical(to), m.TS, s.cfg.HistoryMax, from, text, s.ch,
		envelope(users, pre), post, o.Rate, burst, s.cfg.TTL.Milliseconds(), s.cfg.GuestTTL.Milliseconds(),
		ttl.Milliseconds(), hex.EncodeToString(sum[:8]), call).Slice()
	cancel()
	if err != nil {
		return Sent{}, fmt.Errorf("direct: send in %s: %w", conv.ID, err)
	}
	switch code := res[0].(type) {
	case int64:
		switch code {
		case -1:
			return Sent{}, ErrNoConversation
		case -2:
			ms, _ := res[1].(int64)
			return Sent{}, &RateLimitError{What: "send", RetryAfter: time.Duration(ms) * time.Millisecond}
		case -3:
			return Sent{}, ErrRefReused
		case -4:
			if len(res) < 5 {
				break
			}
			raw, _ := res[1].(string)
			ts, _ := res[2].(string)
			by, _ := res[3].(string)
			m.ID, err = NormalizeID(raw)
			if err != nil {
				return Sent{}, err
			}
			m.TS, _ = strconv.ParseInt(ts, 10, 64)
			if by != call {
				return Sent{Message: m, Repeated: true}, nil
			}
			// this call's own first run, whose answer was lost: its answer
			unread, _ := res[4].(int64)
			return s.sent(ctx, conv, m, unread, now, o.Guest)
		}
		return Sent{}, fmt.Errorf("direct: send in %s: unexpected answer %v", conv.ID, res)
	case string:
		m.ID, err = NormalizeID(code)
		if err != nil {
			return Sent{}, err
		}
		unread, _ := res[1].(int64)
		return s.sent(ctx, conv, m, unread, now, o.Guest)
	}
	return Sent{}, fmt.Errorf("direct: send in %s: unexpected answer %v", conv.ID, res)
}

// sent is Send's answer for m, stored by this call: conv is moved to the
// top of both lists (at now).
func (s *Service) sent(ctx context.Context, conv Conversation, m Message, unread int64, now time.Time, guest bool) (Sent, error) {
	if err := s.touch(ctx, conv, now, guest); err != nil {
		return Sent{Message: m, Unread: unread}, err
	}
	return Sent{Message: m, Unread: unread}, nil
}

// eventParts returns the JSON of a typ event of m, cut where its id goes.
func eventParts(typ string, m Message) (string, string) {
	const mark = "\x00id\x00"
	b, _ := json.Marshal(struct {
		Type         string `json:"type"`
		Conversation string `json:"conversation"`
		ID           string `json:"id"`
		From         string `json:"from"`
		To           string `json:"to"`
		Text         string `json:"text"`
		TS           int64  `json:"ts"`
	}{typ, m.Conversation, mark, m.From, m.To, m.Text, m.TS})
	i := strings.Index(string(b), `\u0000id\u0000`)
	return string(b[:i]), string(b[i+len(`\u0000id\u0000`):])
}

// EventJSON is the "dm" event of m as the channel carries it.
func EventJSON(m Message) []byte {
	pre, post := eventParts(EventMessage, m)
	return []byte(pre + m.ID + post)
}

// Publish publishes frame to users' connections on every node (typing,
// read marks): nothing is stored.
func (s *Service) Publish(ctx context.Context, users []string, frame []byte) error {
	cs := make([]string, len(users))
	for i, u := range users {
		cs[i] = names.Canonical(u)
	}
	if err := s.rdb.Publish(ctx, s.ch, envelope(cs, string(frame))).Err(); err != nil {
		return fmt.Errorf("direct: publish: %w", err)
	}
	return nil
}

// NormalizeID turns a stream id, padded or as Redis writes it, into the
// padded form "%013d-%06d"; ErrBadID when it is not one.
func NormalizeID(s string) (string, error) {
	ms, seq, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(ms, 10, 64)
	b, err2 := strconv.ParseUint(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil || len(s) > 41 {
		return "", fmt.Errorf("%w: %q", ErrBadID, clip(s))
	}
	return fmt.Sprintf("%013d-%06d", a, b), nil
}

// rawID is id as Redis writes it (no padding).
func rawID(id string) string {
	ms, seq, _ := strings.Cut(id, "-")
	ms, seq = strings.TrimLeft(ms, "0"), strings.TrimLeft(seq, "0")
	if ms == "" {
		ms = "0"
	}
	if seq == "" {
		seq = "0"
	}
	return ms + "-" + seq
}

func clip(s string) string {
	if len(s) > 48 {
		return s[:48] + "…"
	}
	return s
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return ""
}
