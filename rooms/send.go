package rooms

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/protocol"
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
// on the room's channel as an Event, in one script and one round trip
// (shared with the says of concurrent calls: see SendMany): it
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
// (Message.ID says which), but a failover now may lose it. A Duplicate
// (a keyed say sent again) is answered so too while no replica holds the
// first message.
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

// definite reports whether a send that failed with err certainly did not
// send: a refusal of the script, or a Redis error reply. A network or
// context error leaves it unknown.
func definite(err error) bool {
	var rerr redis.Error
	var partial errPartial
	if errors.As(err, &partial) {
		return false
	}
	return errors.Is(err, ErrNotSeated) || errors.Is(err, ErrUnknownRoom) || errors.Is(err, ErrRateLimited) ||
		errors.Is(err, ErrIdempotencyMismatch) || errors.Is(err, errUnexpectedReply) || errors.As(err, &rerr)
}

// eventStart is every message event up to its message's id: the same for
// every say, passed once per script call.
const eventStart = `{"type":"message","message":{"id":"`

// eventAfterID encodes the rest of the message Event of m, after its id,
// for message_send.lua to join eventStart, the id and it. eventStart + it
// is what json.Marshal writes for Event{Type: EventMessage, Message:
// &m} with an empty id (FuzzSplitEvent holds it to that), in one
// allocation: a node encodes the event of every say it sends, and
// json.Marshal's way (Message's MarshalJSON, its output checked and
// copied, both halves copied out) took seven.
func eventAfterID(m Message) string {
	var ts [len(protocol.TSLayout) + 8]byte
	t := m.TS.UTC().AppendFormat(ts[:0], protocol.TSLayout)
	var b strings.Builder
	b.Grow(len(`","room":,"from":,"text":,"ts":""}}`) + len(m.Room) + len(m.From) + len(m.Text) + 12 + len(t))
	b.WriteString(`","room":`)
	writeJSONString(&b, m.Room)
	b.WriteString(`,"from":`)
	writeJSONString(&b, m.From)
	b.WriteString(`,"text":`)
	writeJSONString(&b, m.Text)
	b.WriteString(`,"ts":"`)
	b.Write(t)
	b.WriteString(`"}}`)
	return b.String()
}

// writeJSONString writes s as a JSON string as encoding/json writes one:
// quoted, with <, > and & escaped for HTML, U+2028 and U+2029 escaped, and
// each byte of invalid UTF-8 as U+FFFD.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b.WriteString(s[start:i])
			switch c {
			case '"', '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(s[start:i])
			b.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b.WriteString(s[start:i])
			b.WriteString(`\u202`)
			b.WriteByte(hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}
