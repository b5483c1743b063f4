package rooms

import (
	"bytes"
	"context"
	"crypto/rand"
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

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// SendOptions are the per-call knobs of Send.
type SendOptions struct {
	// Rate is the say rate allowed to the sender in the room's lobby, in
	// messages per second; 0 or less means no limit.
	Rate float64
	// Burst is how many says the sender may make at once after a pause
	// (the bucket's size); below 1 means 1.
	Burst float64
	// System sends as the system (an operator's message): the message is
	// from SystemSender whatever the request's User, no seat is needed and
	// no bucket is taken from; the room must exist.
	System bool
	// Server sends as the application's backend (the server API): the
	// message is from the request's User, or from SystemSender when User
	// is ""; no seat is needed and no bucket is taken from; the room must
	// exist. Unlike System, the request's Key applies (a backend's retry
	// is answered with the first message): keys are then the backend's,
	// under the sender's name, so make them unlike a user's own (the
	// realtime core's are "<session>:<hash>").
	Server bool
}

// SystemSender is the From of a message sent with SendOptions.System: not
// a valid user name, so no user can pass for it.
const SystemSender = "@system"

// SendResult is what Send did.
type SendResult struct {
	// Message is the message as stored and published.
	Message Message
	// HasREST is true when some user of the room is held there by a REST
	// attachment (the room's members to mark for polling): a superset, as
	// an expired REST attachment counts until the next renewal or sweep in
	// its lobby, or its user's next attach, detach or reap.
	HasREST bool
	// Duplicate is true when the say's idempotency key had already sent
	// this message, in an earlier call: nothing was stored, published or
	// counted now, and Message is the first one (its id and ts). Skip the
	// side effects that must happen once per message (counting, notifying
	// the sender's other devices); idempotent ones (dirty marks) may be
	// repeated, as the earlier call may have failed before making them. A
	// say Redis applied twice within one call (a client retry after a
	// timeout) is not a Duplicate: this call's answer is its first.
	Duplicate bool
}

// Send appends a message from user to the room's history and publishes it
// on the room's channel as an Event, in one script and one round trip: it
// checks that the user holds a live seat, takes a token from the user's
// say bucket (opt.Rate, opt.Burst), XADDs (MAXLEN ~ HistoryMax) and
// PUBLISHes (SPUBLISH with Config.ShardedPubSub), so the ids on the channel
// come in history order. The global message counter is added to in the
// same pipeline (see SendMany). Send carries no idempotency key: use
// SendMany with SendRequest.Key for a say that may be sent twice.
//
// The say bucket is per user per lobby, not per user: it lives in the
// lobby's hash-tag slot ({lobby:L}:sayrate:<user>) so that the check and the
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
func (s *Messages) Send(ctx context.Context, roomID, user, text string, opt SendOptions) (SendResult, error) {
	out := s.SendMany(ctx, []SendRequest{{Room: roomID, User: user, Text: text}}, opt)
	return out[0].SendResult, out[0].Err
}

// SendRequest is one message of SendMany.
type SendRequest struct {
	Room, User, Text string
	// Key, when not "", is the say's idempotency key (the caller's, say
	// "<session id>:<ref>"). Without one a say is still stored once per
	// call, however often go-redis sends the pipeline, but a second call
	// is a second say. A key is 1 to MaxIdempotencyKey bytes of A–Z a–z 0–9
	// and - _ . : = + / @ ~. A say with a key that User already sent in the
	// room's lobby within Config.IdempotencyTTL is not sent again: the reply
	// is the first message, marked Duplicate; with another text or room it
	// is refused with ErrIdempotencyMismatch, in any lobby (a key is bound to
	// its first message for Config.IdempotencyTTL, even one that was
	// refused). Keys are the sender's own.
	Key string
}

// MaxIdempotencyKey is the longest SendRequest.Key, in bytes.
const MaxIdempotencyKey = 128

// checkIdempotencyKey returns an error wrapping ErrBadIdempotencyKey that
// says what is wrong with key, or nil ("" is no key).
func checkIdempotencyKey(key string) error {
	if len(key) > MaxIdempotencyKey {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBadIdempotencyKey, len(key), MaxIdempotencyKey)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:=+/@~", c) >= 0) {
			return fmt.Errorf("%w: byte %#02x at %d; allowed: A-Z a-z 0-9 - _ . : = + / @ ~", ErrBadIdempotencyKey, c, i)
		}
	}
	return nil
}

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
//
// A request with a Key is idempotent: if Redis applies the call twice (the
// client retried the pipeline after a read timeout while the first one was
// still to run) or the caller sends it again (after a reconnect), it is
// stored and published once; see SendRequest.Key and SendResult.Duplicate.
// Without a key, a retried pipeline stores its says twice.
//
// The global message counter (Counters) is added to in the same pipeline,
// once per call (a token in the counter's slot makes a re-run pipeline add
// nothing), by the number of says sent; the ones Redis definitely did not
// send (refused, duplicates, Redis error replies) are taken back after the
// replies, in a second round trip only then. A say whose answer was lost
// (a timeout) stays counted.
func (s *Messages) SendMany(ctx context.Context, reqs []SendRequest, opt SendOptions) []SendReply {
	out := s.sendMany(ctx, reqs, opt)
	for i := range out {
		if out[i].Err != nil {
			out[i].Err = fmt.Errorf("rooms: send to %s as %s: %w", reqs[i].Room, reqs[i].User, out[i].Err)
		}
	}
	return out
}

// countedTTL is how long a send call's counter token is kept: longer than
// a client's retries of one pipeline take.
const countedTTL = time.Minute

// callKeyTTL is how long the record of a say sent without a key is kept
// (under the key "~<call>/<index>"): longer than the gap between the
// first copy of a pipeline and go-redis's retry of it, which Redis runs
// within a read timeout or two of each other (the retry is sent a read
// timeout after the first copy; a stalled server runs both when it
// wakes). About 150 bytes of Redis memory per say for that long.
const callKeyTTL = 10 * time.Second

type prepared struct {
	m     Message
	lobby string
	tag   string // "<call>/<index>": this say in this call
	keys  []string
	args  []any
	cmd   *redis.Cmd
	wait  *redis.IntCmd // the WAIT behind cmd on its connection; nil without durability
	err   error
	// claim and bound bind the caller's key to this message in every lobby
	// (said_claim.lua); "" for a say without a key.
	claim, bound string
	// refresh is the history ("lobby/seq") whose TTL this say refreshes,
	// marked so by historyDue; "" when it does not.
	refresh string
}

func (s *Messages) prepare(r SendRequest, opt SendOptions, now time.Time, tag string) prepared {
	lobby, seq, err := ParseRoom(r.Room)
	if opt.System || opt.Server && r.User == "" {
		r.User = SystemSender
	} else if err == nil {
		err = names.User(r.User)
	}
	if err == nil && (r.Text == "" || !utf8.ValidString(r.Text)) {
		err = ErrBadText
	}
	if err == nil {
		err = checkIdempotencyKey(r.Key)
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
	if opt.System {
		rate, r.Key = 0, "" // the system has no bucket; its say is keyed by its place in the call, below
	}
	if opt.Server {
		rate = 0 // a backend has no say bucket (the server API limits each key)
	}
	p := prepared{m: m, lobby: lobby, tag: tag,
		keys: []string{roomsKey(s.ks, lobby), membersKey(s.ks, lobby), leasesKey(s.ks, lobby),
			historyKey(s.ks, lobby, seq), rateKey(s.ks, lobby, r.User), restKey(s.ks, lobby)},
		args: []any{seq, r.User, now.UnixMilli(), s.historyMax, r.Text, channel(s.ks, lobby, seq), pre, post,
			s.publish, rate, burst, s.idleTTL.Milliseconds()},
	}
	// A say without a key is keyed by its place in this call, for
	// callKeyTTL: go-redis's retry of the pipeline after a read timeout
	// (the first copy may have run) is then answered by the first copy's
	// record, not stored twice. Another call is another say.
	key, ttl := r.Key, s.idemTTL
	if key == "" {
		key, ttl = "~"+tag, callKeyTTL
	}
	sum := sha256.Sum256([]byte(r.Text))
	hash := hex.EncodeToString(sum[:8])
	p.keys = append(p.keys, saidKey(s.ks, lobby, r.User, key))
	p.args = append(p.args, ttl.Milliseconds(), hash, tag)
	if r.Key != "" {
		p.claim, p.bound = claimKey(s.ks, r.User, r.Key), r.Room+" "+hash
	}
	role := ""
	if opt.System || opt.Server {
		role = "system" // no seat checked, the room must exist
	}
	refresh := ""
	if k := lobby + "/" + strconv.Itoa(seq); s.historyDue(now, k) {
		refresh, p.refresh = "1", k
	}
	p.args = append(p.args, role, refresh)
	return p
}

// historyDue reports whether this node refreshes the TTL of the history of
// room seq of lobby with a send at now, and if so marks it refreshed: at
// most once per IdleTTL/48 (30 minutes at the default 24 h), as Renew's
// historiesDue does. A PEXPIRE on every send cost Redis a command per say
// for a TTL of a day; between refreshes the history expires at most
// IdleTTL/48 sooner than the last say + IdleTTL. message_send.lua sets
// the TTL anyway on a history it creates, so none lives without one.
func (s *Messages) historyDue(now time.Time, k string) bool {
	return s.hist.due(now, k, s.idleTTL/48)
}

// historyNotRefreshed forgets the mark of historyDue for history k ("lobby/
// seq") when the say that was to refresh it was not stored (or may not
// have been): the next say there refreshes it.
func (s *Messages) historyNotRefreshed(k string) { s.hist.forget(k) }

// newCall returns a random id for one send call.
func newCall() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

func (s *Messages) sendMany(ctx context.Context, reqs []SendRequest, opt SendOptions) []SendReply {
	now := time.UnixMilli(s.now().UnixMilli()).UTC() // as History reads it back
	call := newCall()
	ps := make([]prepared, len(reqs))
	var live []int
	for i, r := range reqs {
		ps[i] = s.prepare(r, opt, now, call+"/"+strconv.Itoa(i))
		if ps[i].err == nil {
			live = append(live, i)
		}
	}
	out := make([]SendReply, len(reqs))
	live = s.bindKeys(ctx, ps, live)
	for i := range ps {
		out[i].Err = ps[i].err
		if ps[i].err != nil && ps[i].refresh != "" {
			s.historyNotRefreshed(ps[i].refresh)
		}
	}
	if len(live) == 0 {
		return out
	}
	durable := s.durable()
	countKeys := []string{messagesTotalKey(s.ks), countedKey(s.ks, call)}
	countArgs := []any{len(live), countedTTL.Milliseconds()}
	var counted *redis.Cmd
	// Errors are read per command below. A server without a script
	// (restarted, or a replica just promoted) answers NOSCRIPT and runs
	// nothing: redisx sends those again, behind a WAIT of their own.
	_ = redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
		for _, i := range live {
			ps[i].cmd = p.Script(messageSendScript, ps[i].keys, ps[i].args...)
		}
		if durable {
			s.queueWaits(ctx, p, ps, live)
			p.AfterRetry(func(retry redis.Pipeliner) {
				var again []int
				for _, i := range live {
					if p.Resent(ps[i].cmd) {
						again = append(again, i)
					}
				}
				if len(again) > 0 {
					s.queueWaits(ctx, retry, ps, again)
				}
			})
		}
		counted = p.Script(counterAddScript, countKeys, countArgs...)
	})
	notSent := 0
	for _, i := range live {
		p := &ps[i]
		var stored bool
		out[i].SendResult, stored, out[i].Err = s.sendReply(p)
		if !stored && p.refresh != "" {
			s.historyNotRefreshed(p.refresh)
		}
		if stored && durable {
			out[i].Err = s.replicated(p)
		}
		switch {
		case stored:
			s.m.sent.Inc()
		case out[i].SendResult.Duplicate || definite(out[i].Err):
			notSent++
		}
	}
	switch {
	case counted.Err() != nil:
		s.m.counterErrors.Inc()
	case notSent > 0: // counted says that were not sent: take them back, once
		keys := []string{messagesTotalKey(s.ks), countedKey(s.ks, call+":back")}
		if err := redisx.Run(ctx, s.rdb, counterAddScript, keys, -notSent, countedTTL.Milliseconds()).Err(); err != nil {
			s.m.counterErrors.Inc()
		}
	}
	return out
}

// bindKeys binds each keyed say of live to its message in every lobby, in one
// round trip, and returns the says that may be sent: a key bound to another
// room's or text's message fails with ErrIdempotencyMismatch, a claim that
// Redis did not answer with its error (then nothing is sent). The send
// script's record, in the lobby's slot, catches a key reused within the
// lobby; this catches it across lobbies. A claim Redis applied twice (a
// retry after a timeout) finds itself and passes.
func (s *Messages) bindKeys(ctx context.Context, ps []prepared, live []int) []int {
	var keyed []int
	for _, i := range live {
		if ps[i].claim != "" {
			keyed = append(keyed, i)
		}
	}
	if len(keyed) == 0 {
		return live
	}
	cmds := make(map[int]*redis.Cmd, len(keyed))
	_ = redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
		for _, i := range keyed {
			cmds[i] = p.Script(saidClaimScript, []string{ps[i].claim}, ps[i].bound, s.idemTTL.Milliseconds())
		}
	})
	var ok []int
	for _, i := range live {
		if cmd := cmds[i]; cmd != nil {
			n, err := cmd.Int()
			switch {
			case err != nil:
				ps[i].err = err
				continue
			case n != 1:
				ps[i].err = ErrIdempotencyMismatch
				continue
			}
		}
		ok = append(ok, i)
	}
	return ok
}

// definite reports whether a send that failed with err certainly did not
// send: a refusal of the script, or a Redis error reply. A network or
// context error leaves it unknown.
func definite(err error) bool {
	var rerr redis.Error
	return errors.Is(err, ErrNotSeated) || errors.Is(err, ErrUnknownRoom) || errors.Is(err, ErrRateLimited) ||
		errors.Is(err, ErrIdempotencyMismatch) || errors.Is(err, errUnexpectedReply) || errors.As(err, &rerr)
}

// sendReply reads p's script reply. stored is true when this call stored
// the message: now, or in an earlier run of this call's pipeline that Redis
// applied before this one (the say's key says so).
func (s *Messages) sendReply(p *prepared) (r SendResult, stored bool, err error) {
	v, err := p.cmd.Slice()
	if err != nil {
		return SendResult{}, false, err
	}
	if len(v) == 0 {
		return SendResult{}, false, errUnexpectedReply
	}
	if id, ok := v[0].(string); ok && len(v) == 2 {
		rest, _ := v[1].(int64)
		m := p.m
		m.ID, err = padID(id)
		return SendResult{Message: m, HasREST: rest > 0}, err == nil, err
	}
	switch v[0] {
	case int64(0):
		return SendResult{}, false, ErrNotSeated
	case int64(-1):
		return SendResult{}, false, ErrUnknownRoom
	case int64(-2):
		wait := time.Millisecond
		if len(v) == 2 {
			if n, ok := v[1].(int64); ok && n > 1 {
				wait = time.Duration(n) * time.Millisecond
			}
		}
		return SendResult{}, false, &RateLimitError{RetryAfter: wait}
	case int64(-3):
		return SendResult{}, false, ErrIdempotencyMismatch
	case int64(-4):
		if len(v) == 5 {
			id, _ := v[1].(string)
			tsStr, _ := v[2].(string)
			tag, _ := v[3].(string)
			rest, _ := v[4].(int64)
			ts, terr := strconv.ParseInt(tsStr, 10, 64)
			m := p.m
			m.ID, err = padID(id)
			if err == nil && terr == nil {
				m.TS = time.UnixMilli(ts).UTC()
				replay := tag == p.tag
				return SendResult{Message: m, HasREST: rest > 0, Duplicate: !replay}, replay, nil
			}
		}
	}
	return SendResult{}, false, fmt.Errorf("%w %v", errUnexpectedReply, v)
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
