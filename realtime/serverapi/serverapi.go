// Package serverapi is the use case of the server API for backends: what
// the application's own backend (an API key of the server role, not the
// admin token) may do to chat — publish into a room as the system or as a
// named user, broadcast to every room of a lobby, read a user's presence,
// disconnect a user on every node, and grant or revoke a user's access to
// a private room — each rate limited per key.
//
// It is built on the domain packages (rooms, presence, ratelimit) and on
// the realtime core's exported API, each through an interface declared
// here: the say rules (CheckSay), the coalesced marks of REST sessions,
// and the core's command channel (Disconnect, Unseat), which carries a
// disconnect or a revoked seat to every node. Who holds which key, and
// the audit log, are the transport's (package web): a call here is already
// admitted.
//
// Writes are idempotent. A publish or broadcast with an idempotency key is
// one say per room keyed in the send script itself (rooms.SendRequest.Key,
// under the sender's name, derived from the API key's name and the
// caller's key): a retry answers the first message and stores nothing. A
// grant or revoke is a set change, applied once however often it is asked.
// A disconnect closes what is open.
package serverapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/ratelimit"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
)

// messages sends the backend's messages (rooms.Messages).
type messages interface {
	SendMany(ctx context.Context, reqs []rooms.SendRequest, opt rooms.SendOptions) []rooms.SendReply
}

// roomLister lists a lobby's rooms (rooms.Seats).
type roomLister interface {
	Rooms(ctx context.Context, lobby string) ([]rooms.Room, error)
}

// access changes who may enter a private room (rooms.Private).
type access interface {
	Grant(ctx context.Context, roomID, user string) (bool, error)
	Revoke(ctx context.Context, roomID, user string) (bool, error)
}

// people reads presence (presence.Presence).
type people interface {
	Get(ctx context.Context, user string) (presence.Status, error)
}

// sayRules checks a text against the say rules (the chat use case's).
type sayRules interface {
	CheckSay(room, text string) error
}

// marks are the core's coalesced dirty marks of REST sessions.
type marks interface {
	Room(room string, bits dirty.Mask)
}

// commands are the core's commands to every node (realtime.Node).
type commands interface {
	Disconnect(ctx context.Context, user, node, conn, reason string) error
	Unseat(ctx context.Context, user, room string) error
}

var (
	_ messages   = (*rooms.Messages)(nil)
	_ roomLister = (*rooms.Seats)(nil)
	_ access     = (*rooms.Private)(nil)
	_ people     = (*presence.Presence)(nil)
	_ marks      = realtime.Marks{}
	_ commands   = (*realtime.Node)(nil)
)

// Config configures a ServerAPI; every field but Now and Registerer is
// required.
type Config struct {
	Messages messages
	Seats    roomLister
	Private  access
	Presence people
	SayRules sayRules
	Marks    marks
	Commands commands
	// Redis keeps the per-key rate limits' buckets, under Prefix.
	Redis  redis.UniversalClient
	Prefix string
	// Now is the rate limits' clock; nil = time.Now.
	Now func() time.Time
	// Registerer receives the rate limits' metrics; nil = none.
	Registerer prometheus.Registerer
}

// ServerAPI is the server API's use case.
type ServerAPI struct {
	messages messages
	seats    roomLister
	private  access
	people   people
	say      sayRules
	marks    marks
	commands commands

	rdb    redis.UniversalClient
	prefix string
	now    func() time.Time
	reg    prometheus.Registerer

	mu       sync.Mutex
	limiters map[float64]*ratelimit.Limiter // by rate: keys of one rate share a Limiter (its buckets are per key)
}

// New returns the use case.
func New(cfg Config) *ServerAPI {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &ServerAPI{messages: cfg.Messages, seats: cfg.Seats, private: cfg.Private, people: cfg.Presence,
		say: cfg.SayRules, marks: cfg.Marks, commands: cfg.Commands,
		rdb: cfg.Redis, prefix: cfg.Prefix, now: cfg.Now, reg: cfg.Registerer, limiters: map[float64]*ratelimit.Limiter{}}
}

// Errors of the server API.
var (
	// ErrRateLimited is returned, wrapped in a *realtime.LimitError that
	// says when to retry, by Allow when the key has spent its requests.
	ErrRateLimited = errcode.New(errcode.RateLimited, "serverapi: too many requests for this key")
	// ErrNoRooms is returned by Broadcast for a lobby that has no room.
	ErrNoRooms = errcode.New(errcode.NotFound, "serverapi: the lobby has no room")
	// ErrBadReason is returned by Disconnect for a reason over MaxReason bytes.
	ErrBadReason = errcode.New(errcode.BadRequest, "serverapi: the reason is too long")
)

// MaxBroadcastRooms bounds the rooms one Broadcast reaches: the lowest
// numbered ones of the lobby.
const MaxBroadcastRooms = 1000

// MaxReason is the longest reason of Disconnect, in bytes.
const MaxReason = 500

// DefaultReason is the close reason of Disconnect when none is given.
const DefaultReason = "disconnected by the application"

// Allow takes one request of API key name's budget: perSecond requests a
// second, as many at once (a token bucket per key, shared by every node:
// package ratelimit). It returns a *realtime.LimitError wrapping
// ErrRateLimited when the key has none left, and Redis errors.
func (s *ServerAPI) Allow(ctx context.Context, name string, perSecond float64) error {
	ok, retry, err := s.limiter(perSecond).Allow(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return &realtime.LimitError{Err: ErrRateLimited, Retry: max(retry, time.Second),
			Text: fmt.Sprintf("this API key may make %g requests a second; retry in %.1f s", perSecond, max(retry.Seconds(), 0.1))}
	}
	return nil
}

func (s *ServerAPI) limiter(perSecond float64) *ratelimit.Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.limiters[perSecond]
	if l == nil {
		rate := func() float64 { return perSecond }
		l = ratelimit.New(s.rdb, ratelimit.Config{Prefix: keyspace.New(s.prefix).Prefix() + ":serverapi",
			Rate: rate, Burst: rate, Now: s.now, Registerer: s.reg})
		s.limiters[perSecond] = l
	}
	return l
}

// idemKey is the say key of a backend's message: the API key's name, the
// caller's Idempotency-Key and the room (a broadcast's one key is a key
// per room), hashed to a fixed length and alphabet. "" without a key.
func idemKey(apiKey, key, room string) string {
	if key == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(apiKey + "\n" + key + "\n" + room))
	return "srv:" + hex.EncodeToString(sum[:16])
}

// Publish stores text in room and fans it out to the room's members on
// every node, from user (a valid user name, who needs no seat) or from the
// system (user ""), as one say of the send script: it has an id, stays in
// the history and counts for unread like any message. key is the caller's
// Idempotency-Key ("" = none), scoped to apiKey: the same key again within
// the send's idempotency TTL answers the first message and stores nothing;
// the same key for another room or text is refused. It returns what the
// say rules return (ErrEmptyText, ErrBadUTF8, a *TooLongError),
// names.ErrBadName, rooms.ErrUnknownRoom, rooms.ErrIdempotencyMismatch,
// rooms.ErrBadIdempotencyKey and Redis errors.
func (s *ServerAPI) Publish(ctx context.Context, apiKey, room, user, text, key string) (rooms.Message, error) {
	if err := s.say.CheckSay(room, text); err != nil {
		return rooms.Message{}, err
	}
	if user != "" {
		if err := names.User(user); err != nil {
			return rooms.Message{}, err
		}
	}
	out := s.messages.SendMany(ctx, []rooms.SendRequest{{Room: room, User: user, Text: text, Key: idemKey(apiKey, key, room)}},
		rooms.SendOptions{Server: true})
	if out[0].HasREST {
		s.marks.Room(room, dirty.Of(dirty.Messages))
	}
	return out[0].Message, out[0].Err
}

// Broadcast publishes text from the system into every room of lobby (the
// MaxBroadcastRooms lowest numbered), in one pipelined round trip, as
// Publish does each. With key, each room's
// message is keyed (apiKey, key, room): a retry answers the rooms that
// had it with their first message and sends it to the rooms that had not
// (made since, or failed the first time). It returns the messages sent, in
// room order, and ErrNoRooms for a lobby without rooms; a room whose send
// failed fails the call with its error, after the others were sent. It
// returns what Publish returns otherwise.
func (s *ServerAPI) Broadcast(ctx context.Context, apiKey, lobby, text, key string) ([]rooms.Message, error) {
	if err := names.Lobby(lobby); err != nil {
		return nil, err
	}
	rs, err := s.seats.Rooms(ctx, lobby)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNoRooms, lobby)
	}
	rs = rs[:min(len(rs), MaxBroadcastRooms)]
	if err := s.say.CheckSay(rs[0].ID, text); err != nil {
		return nil, err
	}
	reqs := make([]rooms.SendRequest, len(rs))
	for i, r := range rs {
		reqs[i] = rooms.SendRequest{Room: r.ID, Text: text, Key: idemKey(apiKey, key, r.ID)}
	}
	out := make([]rooms.Message, 0, len(rs))
	var first error
	for i, rep := range s.messages.SendMany(ctx, reqs, rooms.SendOptions{Server: true}) {
		if rep.HasREST {
			s.marks.Room(reqs[i].Room, dirty.Of(dirty.Messages))
		}
		if rep.Err != nil {
			if first == nil {
				first = rep.Err
			}
			continue
		}
		out = append(out, rep.Message)
	}
	return out, first
}

// Presence returns user's presence, as GET /presence/{user} shows it to
// an admin (every room). It returns names.ErrBadName and Redis errors.
func (s *ServerAPI) Presence(ctx context.Context, user string) (presence.Status, error) {
	if err := names.User(user); err != nil {
		return presence.Status{}, err
	}
	return s.people.Get(ctx, user)
}

// Disconnect closes every realtime connection of user (WebSockets and
// event streams) on every node with close code 4001 and reason (clipped
// to 120 bytes; DefaultReason when ""). Nothing is stored: the user may
// reconnect at once. It returns names.ErrBadName, ErrBadReason and Redis
// errors.
func (s *ServerAPI) Disconnect(ctx context.Context, user, reason string) error {
	if err := names.User(user); err != nil {
		return err
	}
	if len(reason) > MaxReason {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadReason, len(reason), MaxReason)
	}
	if reason == "" {
		reason = DefaultReason
	}
	return s.commands.Disconnect(ctx, user, "", "", reason)
}

// Grant lets user into the private room (rooms.Private.Grant): the user
// may then resume it (WebSocket resume, POST /rooms/{room}/join) and read
// it. It reports whether the room's users changed. It returns
// rooms.ErrUnknownRoom, rooms.ErrNotPrivate, rooms.ErrRoomFull,
// names.ErrBadName and Redis errors.
func (s *ServerAPI) Grant(ctx context.Context, room, user string) (bool, error) {
	return s.private.Grant(ctx, room, user)
}

// Revoke takes user out of the private room's users and their seat
// (rooms.Private.Revoke), then takes their clients out of the room on
// every node (each gets a "left" event; the connections stay open). A
// retry does it all again and changes nothing more. It reports whether the
// room's users changed, and returns what Grant returns but ErrRoomFull.
func (s *ServerAPI) Revoke(ctx context.Context, room, user string) (bool, error) {
	changed, err := s.private.Revoke(ctx, room, user)
	if err != nil {
		return false, err
	}
	return changed, s.commands.Unseat(ctx, user, room)
}
