package chat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// The one send path. A WebSocket client's says and a REST message post go
// through the same steps: CheckSay (text and name, before anything costs a
// token), the mute check, the local knowledge of an empty say bucket (a
// refusal without a Redis call), rooms.SendMany (seat check, rate limit,
// idempotency, XADD and PUBLISH in one script call per lobby, in round
// trips shared with the node's other senders' batches), a seat lost by lease taken back while the sender still shows
// the room, and the REST members' marks for every stored message. A REST
// post is a batch of one.

// sender is the one who says: a WebSocket client or a REST session. It
// says whether it still shows room (so a seat lost by lease is taken back)
// and what attachment holds its seat.
type sender struct {
	p      realtime.Principal
	att    rooms.Attach
	inRoom func(ctx context.Context, room string) bool
}

// sendResult is the answer to one say.
type sendResult struct {
	msg rooms.Message
	err error
}

// CheckSay checks a chat message against the live settings and the room
// name; a refusal here costs no rate-limit token. It returns ErrEmptyText,
// ErrBadUTF8, a *TooLongError and names.ErrBadName.
func (ch *Chat) CheckSay(room, text string) error {
	if text == "" {
		return realtime.ErrEmptyText
	}
	if !utf8.ValidString(text) {
		return realtime.ErrBadUTF8
	}
	if max, got := ch.settings.Int(settings.MessageMaxLength), utf8.RuneCountInString(text); got > max {
		return &realtime.TooLongError{Max: max, Got: got}
	}
	return names.Room(room)
}

func (ch *Chat) sendOptions() rooms.SendOptions {
	rate := ch.settings.Float(settings.RateMessagesPerSecond)
	return rooms.SendOptions{Rate: rate, Burst: max(rate, 1)}
}

// idemKey is the idempotency key of a say: the session and the client's
// own id of the message (a WebSocket frame's ref, a REST post's
// Idempotency-Key), hashed to a fixed length and alphabet. The same
// session re-sending the same id — a reconnect, a retry — is the same
// message. "" without an id: no dedup.
func idemKey(session, id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return session + ":" + hex.EncodeToString(sum[:16])
}

// send sends reqs of s in order (rooms.SendMany: in the node's next send
// commit) and answers each.
func (ch *Chat) send(ctx context.Context, s sender, reqs []realtime.Say) []sendResult {
	out := make([]sendResult, len(reqs))
	if err := ch.mod.Muted(ctx, s.p.User); err != nil {
		for i := range out {
			out[i].err = err
		}
		return out
	}
	now := ch.now()
	var batch []rooms.SendRequest
	var idx []int
	for i, r := range reqs {
		if wait := ch.buckets.empty(s.p.User, r.Room, now); wait > 0 {
			out[i].err = &rooms.RateLimitError{RetryAfter: wait}
			continue
		}
		batch = append(batch, rooms.SendRequest{Room: r.Room, User: s.p.User, Text: r.Text, Key: idemKey(s.p.Session, r.Ref)})
		idx = append(idx, i)
	}
	if ch.hooks != nil {
		batch, idx = ch.publishHook(ctx, s, reqs, batch, idx, out)
	}
	if len(batch) == 0 {
		return out
	}
	opt := ch.sendOptions()
	replies := ch.messages.SendMany(ctx, batch, opt)
	for j, rep := range replies {
		i, r := idx[j], reqs[idx[j]]
		res, err := rep.SendResult, rep.Err
		if errors.Is(err, rooms.ErrNotSeated) && s.inRoom(ctx, r.Room) {
			// The seat went while the sender still shows the room (its
			// lease ran out during an outage): take it back if it is free,
			// and send once more.
			if _, rerr := ch.seats.Reclaim(ctx, r.Room, s.p.User, s.att); rerr == nil {
				again := ch.messages.SendMany(ctx, batch[j:j+1], opt)
				res, err = again[0].SendResult, again[0].Err
			}
		}
		var rl *rooms.RateLimitError
		if errors.As(err, &rl) {
			ch.buckets.note(s.p.User, r.Room, now, rl.RetryAfter)
		}
		// A message is stored when there is no error, and under
		// message.durability=replica also when no replica acknowledged it:
		// either way the REST members must see it.
		if (err == nil || errors.Is(err, rooms.ErrNotReplicated)) && res.HasREST {
			ch.marks.Room(r.Room, dirty.Of(dirty.Messages))
		}
		out[i] = sendResult{msg: res.Message, err: err}
	}
	return out
}

// Post sends one message of a REST session (POST /rooms/{room}/messages):
// the same path as a WebSocket say, a batch of one. key is the request's
// Idempotency-Key ("" = none): the same session posting the same key again
// gets the first message back and sends nothing.
func (rt *REST) Post(ctx context.Context, p realtime.Principal, room, text, key string) (rooms.Message, error) {
	ch := rt.ch
	if err := ch.CheckSay(room, text); err != nil {
		return rooms.Message{}, err
	}
	s := sender{p: p, att: restAttach(p.Session), inRoom: func(ctx context.Context, room string) bool { return rt.restInRoom(ctx, p, room) }}
	res := ch.send(ctx, s, []realtime.Say{{Room: room, Text: text, Ref: key}})[0]
	if errors.Is(res.err, rooms.ErrNotSeated) {
		// Say why: a REST client that stopped polling lost its seat, and
		// nothing else tells it so.
		return rooms.Message{}, fmt.Errorf("%w: you hold no seat in %s: you never joined it, you left it, or your seat lapsed because the session did not poll (a REST session keeps its seats by polling GET /api/v1/poll at least once every %s, seat.lease_seconds); join the room again",
			rooms.ErrNotSeated, room, realtime.HumanDuration(ch.lease()))
	}
	return res.msg, res.err
}

// Say queues a say of the client: checked now (a refusal answers at once),
// sent in arrival order by the client's say queue (realtime.Client.QueueSay,
// which bounds it and makes the reader wait when it is full); the ack (with
// ref) or the error follows when Redis answered. It returns
// realtime.ErrClientClosed when the client closed meanwhile (queued says are
// then dropped, never sent).
func (ch *Chat) Say(c *realtime.Client, room, text, ref string) error {
	if err := ch.CheckSay(room, text); err != nil {
		return err
	}
	return c.QueueSay(realtime.Say{Room: room, Text: text, Ref: ref}, func(ctx context.Context, batch []realtime.Say) {
		ch.sendQueued(ctx, c, batch)
	})
}

// Flush waits until the client's queued says are answered (or dropped).
func (ch *Chat) Flush(c *realtime.Client) { c.FlushSays() }

// sendQueued sends a batch of the client's queued says in one SendMany
// call and answers each: an ack for a say with a ref, an error event for a
// refusal.
func (ch *Chat) sendQueued(ctx context.Context, c *realtime.Client, batch []realtime.Say) {
	s := sender{p: c.Principal(), att: ch.wsAttach(c), inRoom: func(_ context.Context, room string) bool { return c.InRoom(room) }}
	res := ch.send(ctx, s, batch)
	for i, r := range batch {
		if res[i].err != nil {
			c.Refuse(res[i].err, r.Room, r.Ref)
			continue
		}
		if r.Ref != "" {
			c.SendEvent(protocol.Ack{Ref: r.Ref, ID: res[i].msg.ID, Room: r.Room})
		}
	}
}

// Refuse sends err to the client as an error event naming the room and ref
// of the frame that caused it (realtime.Client.Refuse: a flood of rate
// limited frames closes it).
func (ch *Chat) Refuse(c *realtime.Client, err error, room, ref string) { c.Refuse(err, room, ref) }

// emptyBuckets is this node's knowledge of empty say buckets: after Redis
// refused a say as rate limited, the sender's bucket in that lobby holds no
// token until the refusal's retry time, so a say meanwhile is refused here
// without a Redis call. Another node may have taken tokens too, so this
// only ever refuses what Redis would refuse.
type emptyBuckets struct {
	mu    sync.Mutex
	until map[string]time.Time // user \x00 lobby → when a token is back
}

const maxEmptyBuckets = 100_000

func bucketKey(user, room string) string {
	lobby, _, err := rooms.ParseRoom(room)
	if err != nil {
		lobby = room
	}
	return user + "\x00" + lobby
}

// empty returns how long the bucket of user in room's lobby stays empty,
// or 0 when a say may pass.
func (b *emptyBuckets) empty(user, room string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.until[bucketKey(user, room)]
	if !ok || !now.Before(t) {
		return 0
	}
	return t.Sub(now)
}

// note records a refusal of Redis with its retry time.
func (b *emptyBuckets) note(user, room string, now time.Time, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until == nil || len(b.until) >= maxEmptyBuckets {
		b.until = map[string]time.Time{} // bounded: start over
	}
	b.until[bucketKey(user, room)] = now.Add(wait)
}

// TypingEvery is the least time between two relayed typing events of one
// user in one room.
const TypingEvery = 2 * time.Second

// throttle lets one event per key through every TypingEvery.
type throttle struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (t *throttle) allow(key string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	if last, ok := t.last[key]; ok && now.Sub(last) < TypingEvery {
		return false
	}
	if len(t.last) > 100_000 {
		for k, v := range t.last {
			if now.Sub(v) >= TypingEvery {
				delete(t.last, k)
			}
		}
	}
	t.last[key] = now
	return true
}
