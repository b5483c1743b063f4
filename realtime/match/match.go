// Package match is the matchmaking use case of a chatd node: tickets
// (submit, status, cancel, and parties by invitation and acceptance), and
// what a formed match or an expired ticket sets off. It owns no Redis keys
// (package matchmaking owns the queues, package rooms the private rooms);
// it owns the node's matchers and their hooks, so nothing is wired into it
// after it is built.
//
// It is built on the realtime core from what it declares: matchStore
// (package matchmaking), matchRooms (rooms.Private), onlineChecker
// (presence), players (the core's Hub), marks (realtime.Marks), and the
// node's bus and loops (Start). Polls read its Events; admin its Queues.
package match

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// matchStore is what the matchmaking use case needs of package matchmaking.
type matchStore interface {
	Submit(ctx context.Context, queue string, t matchmaking.Ticket) (string, error)
	Invite(ctx context.Context, queue string, t matchmaking.Ticket) (matchmaking.Status, error)
	Accept(ctx context.Context, queue, id, user string) (matchmaking.Status, error)
	Cancel(ctx context.Context, queue, id string) (matchmaking.Status, error)
	Status(ctx context.Context, queue, id string) (matchmaking.Status, error)
	Queue(name string) (matchmaking.Queue, error)
	Queues() []matchmaking.Queue
	Depth(ctx context.Context, queue string) (matchmaking.Depth, error)
	Notify(ctx context.Context, notes []matchmaking.Notice) error
	Events(ctx context.Context, user string) ([]matchmaking.Event, error)
	Channel() string
}

// matchRooms makes the private room of a match.
type matchRooms interface {
	CreateRoom(ctx context.Context, roomID string, users []string, reserve time.Duration) (rooms.Room, error)
}

// reacher refuses an invitation its invitee would not take: either of the
// two blocks the other (realtime/direct's CheckReach, dm.ErrBlocked).
type reacher interface {
	CheckReach(ctx context.Context, from, to string) error
}

// onlineChecker tells whether a user has a live session somewhere.
type onlineChecker interface {
	Get(ctx context.Context, user string) (presence.Status, error)
}

var (
	_ matchStore    = (*matchmaking.Service)(nil)
	_ matchRooms    = (*rooms.Private)(nil)
	_ onlineChecker = (*presence.Presence)(nil)
)

// Matchmaking is the matchmaking use case: tickets (submit, status,
// cancel, for WebSocket and REST alike), and what a formed match or an
// expired ticket sets off. It owns the node's matchers (started and stopped
// with the node; every node runs them, the queue's lock decides which one
// forms a queue's matches) and their hooks: a match becomes a private room
// with the players' seats reserved for the queue's reserve_seconds, and
// every player — on every node, over every connection, and in their REST
// polls — learns of it; an expired ticket is reported the same way.
type Matchmaking struct {
	svc      matchStore
	matchers *matchmaking.Matchers
	rooms    matchRooms
	online   onlineChecker
	hub      players
	marks    marks
	now      func() time.Time
	log      *slog.Logger
	roomKey  []byte // Config.MatchRoomKey
	node     node
	hooks    *hooks.Hooks
	reach    reacher // nil = every invitation may reach
	recent   *recent // the payloads delivered lately
}

// liveSettings read the queues' definitions (package settings).
type liveSettings interface {
	String(key string) string
}

// players are this node's clients by user (realtime.Hub).
type players interface {
	UserClients(user string) []*realtime.Client
}

// marks marks a user's poll sections dirty (realtime.Marks).
type marks interface {
	User(user string, bits dirty.Mask)
}

// node is the node's bus and loops (realtime.Node).
type node interface {
	Subscribe(ctx context.Context, channel string, h bus.Handler) error
	RunContext() context.Context
}

var (
	_ players = (*realtime.Hub)(nil)
	_ marks   = realtime.Marks{}
	_ node    = (*realtime.Node)(nil)
)

// Config configures the matchmaking use case.
type Config struct {
	// Node is the realtime core. Required.
	Node *realtime.Node
	// Redis and Prefix are the node's (realtime.Config's): the matchmaking
	// service's client and key namespace. Redis is required.
	Redis  redis.UniversalClient
	Prefix string
	// Settings are the live settings (the queues' definitions), Rooms the
	// private rooms, Presence who is online, Marks the core's dirty marks,
	// Locks the distributed locks of the matchers. Required.
	Settings liveSettings
	Rooms    matchRooms
	Presence onlineChecker
	Marks    marks
	Locks    *lock.Client
	// RoomKey makes the number of each match's private room (see Room):
	// every node must have the same; nil = room 1, an id anyone can guess
	// from the match's.
	RoomKey []byte
	// Reach refuses a party invitation of a user its invitee blocks (or
	// who blocks the invitee); nil = none refused.
	Reach reacher
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil = none.
	Registerer prometheus.Registerer
	// Hooks is the application's backend (the match hook: matchHook);
	// nil = none.
	Hooks *hooks.Hooks
}

// New builds the matchmaking use case: its matchmaking service and
// matchers (whose hooks are its own), on the core's private rooms,
// presence and locks. Start starts it. It returns matchmaking's errors.
func New(cfg Config) (*Matchmaking, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st := cfg.Settings
	mms := matchmaking.New(cfg.Redis, matchmaking.Config{Prefix: cfg.Prefix, Clock: cfg.Now, Registerer: cfg.Registerer, Logger: cfg.Logger,
		Queues: func() string { return st.String(settings.MatchmakingQueues) }})
	mm := &Matchmaking{svc: mms, rooms: cfg.Rooms, online: cfg.Presence, hub: cfg.Node.Hub(), marks: cfg.Marks,
		now: cfg.Now, log: cfg.Logger, roomKey: cfg.RoomKey, node: cfg.Node, hooks: cfg.Hooks, reach: cfg.Reach,
		recent: newRecent()}
	var err error
	mm.matchers, err = matchmaking.NewMatchers(mms, matchmaking.MatchersConfig{Locks: cfg.Locks,
		OnMatched: mm.matched, OnExpired: mm.expired, OnPending: mm.checkPending})
	if err != nil {
		return nil, err
	}
	return mm, nil
}

// TicketRequest is a ticket as a client asks for it.
type TicketRequest struct {
	// Skill is the rating the match is made on.
	Skill float64 `json:"skill"`
	// Party lists the other users invited to play with the caller (Invite
	// only; each must be online).
	Party []string `json:"party,omitempty"`
	// Attributes must be equal for tickets to match.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Submit enqueues a ticket of p's user alone in queue and returns its
// status as read just after: waiting, or already matched when the queue's
// matcher formed a match with it in between. A ticket naming a party is
// refused with matchmaking.ErrConsentRequired: a party is formed by
// Invite and queues once its members Accept, so nobody is queued by
// someone else. It returns matchmaking's errors (ErrUnknownQueue,
// ErrBadTicket, ErrBadName, *TicketOpenError) and Redis errors.
func (mm *Matchmaking) Submit(ctx context.Context, p realtime.Principal, queue string, req TicketRequest) (matchmaking.Status, error) {
	if _, err := mm.svc.Queue(queue); err != nil {
		return matchmaking.Status{}, err
	}
	if len(req.Party) > 0 {
		return matchmaking.Status{}, fmt.Errorf("%w: a ticket queues its sender alone; a party is formed by invitation "+
			"(POST /matchmaking/%s/parties, or an invite frame) and queues once every member accepts", matchmaking.ErrConsentRequired, queue)
	}
	id, err := mm.svc.Submit(ctx, queue, matchmaking.Ticket{User: p.User, Skill: req.Skill, Attributes: req.Attributes})
	if err != nil {
		return matchmaking.Status{}, err
	}
	return mm.svc.Status(ctx, queue, id)
}

// Invite forms a pending party led by p's user with req.Party invited
// (each must be online: else realtime.ErrPartyOffline) and tells each invitee by a
// party_invite event; the party queues once all of them Accept. It
// returns matchmaking's errors (ErrUnknownQueue, ErrBadTicket, ErrBadName)
// and Redis errors.
func (mm *Matchmaking) Invite(ctx context.Context, p realtime.Principal, queue string, req TicketRequest) (matchmaking.Status, error) {
	q, err := mm.svc.Queue(queue)
	if err != nil {
		return matchmaking.Status{}, err
	}
	if len(req.Party) >= q.MaxParty {
		// refused before a presence read per name
		return matchmaking.Status{}, fmt.Errorf("%w: a party of %d; queue %s takes at most %d players per ticket",
			matchmaking.ErrBadTicket, len(req.Party)+1, queue, q.MaxParty)
	}
	for _, u := range req.Party {
		if err := names.User(u); err != nil {
			return matchmaking.Status{}, fmt.Errorf("%w: party: %w", matchmaking.ErrBadName, err)
		}
		if names.Canonical(u) == names.Canonical(p.User) {
			continue // the ticket's check refuses it with its own words
		}
		if mm.reach != nil {
			if err := mm.reach.CheckReach(ctx, p.User, u); err != nil {
				return matchmaking.Status{}, err
			}
		}
		if err := mm.mustBeOnline(ctx, u); err != nil {
			return matchmaking.Status{}, err
		}
	}
	st, err := mm.svc.Invite(ctx, queue, matchmaking.Ticket{User: p.User, Party: req.Party, Skill: req.Skill, Attributes: req.Attributes})
	if err != nil {
		return matchmaking.Status{}, err
	}
	return st, mm.tell(ctx, []matchmaking.Notice{matchmaking.PartyInviteEvent(st)})
}

// Accept accepts, for p's user, the invitation to the pending party id
// and returns the party's status after: pending, or waiting in the queue
// once every invitee accepted. Its players are told (party_update). Every
// player must still be online: one who is not dissolves the party (the
// others are told, reason offline) and the answer is realtime.ErrPartyOffline. It
// returns matchmaking.ErrUnknownTicket when p's user is not invited to
// it, ErrNotPending, *TicketOpenError and Redis errors.
func (mm *Matchmaking) Accept(ctx context.Context, p realtime.Principal, queue, id string) (matchmaking.Status, error) {
	st, err := mm.invitation(ctx, p, queue, id)
	if err != nil {
		return matchmaking.Status{}, err
	}
	if st.State == matchmaking.Pending {
		for _, u := range st.Ticket.Players() {
			if names.Canonical(u) == names.Canonical(p.User) {
				continue
			}
			if err := mm.mustBeOnline(ctx, u); err != nil {
				if errors.Is(err, realtime.ErrPartyOffline) {
					if _, cerr := mm.dissolve(ctx, queue, id, u, matchmaking.ReasonOffline); cerr != nil {
						return matchmaking.Status{}, cerr
					}
				}
				return matchmaking.Status{}, err
			}
		}
	}
	st, err = mm.svc.Accept(ctx, queue, id, p.User)
	if err != nil {
		return st, err
	}
	return st, mm.tell(ctx, []matchmaking.Notice{matchmaking.PartyUpdateEvent(st, p.User, matchmaking.ReasonAccepted, mm.now())})
}

// Decline declines, for p's user, the invitation to the pending party id:
// the party is dissolved (cancelled) and its players are told
// (party_update, reason declined). A party no longer pending is answered
// as it is, unchanged (to leave a queued ticket, cancel it). It returns
// matchmaking.ErrUnknownTicket when p's user is not invited to it, and
// Redis errors.
func (mm *Matchmaking) Decline(ctx context.Context, p realtime.Principal, queue, id string) (matchmaking.Status, error) {
	st, err := mm.invitation(ctx, p, queue, id)
	if err != nil || st.State != matchmaking.Pending {
		return st, err
	}
	return mm.dissolve(ctx, queue, id, p.User, matchmaking.ReasonDeclined)
}

// invitation returns the status of party id when p's user is one of its
// invitees (not its leader), else matchmaking.ErrUnknownTicket.
func (mm *Matchmaking) invitation(ctx context.Context, p realtime.Principal, queue, id string) (matchmaking.Status, error) {
	st, err := mm.svc.Status(ctx, queue, id)
	if err != nil {
		return matchmaking.Status{}, err
	}
	if !slices.ContainsFunc(st.Ticket.Party, func(u string) bool { return names.Canonical(u) == names.Canonical(p.User) }) {
		return matchmaking.Status{}, fmt.Errorf("matchmaking: invitation %s in %s: %w", id, queue, matchmaking.ErrUnknownTicket)
	}
	return st, nil
}

// dissolve cancels the pending party id because user did reason, and
// tells its players when it was still pending.
func (mm *Matchmaking) dissolve(ctx context.Context, queue, id, user, reason string) (matchmaking.Status, error) {
	before, err := mm.svc.Status(ctx, queue, id)
	if err != nil {
		return matchmaking.Status{}, err
	}
	st, err := mm.svc.Cancel(ctx, queue, id)
	if err != nil {
		return matchmaking.Status{}, err
	}
	if before.State == matchmaking.Pending && st.State == matchmaking.Cancelled {
		return st, mm.tell(ctx, []matchmaking.Notice{matchmaking.PartyUpdateEvent(st, user, reason, mm.now())})
	}
	return st, nil
}

// checkPending is the OnPending hook (run by the queue's matcher every
// few seconds): a pending party one of whose players is no longer online
// is dissolved, and its players are told (party_update, reason offline).
func (mm *Matchmaking) checkPending(ctx context.Context, pending []matchmaking.Status) error {
	for _, st := range pending {
		for _, u := range st.Ticket.Players() {
			err := mm.mustBeOnline(ctx, u)
			if errors.Is(err, realtime.ErrPartyOffline) {
				_, err = mm.dissolve(ctx, st.Ticket.Queue, st.Ticket.ID, u, matchmaking.ReasonOffline)
				if err != nil {
					return err
				}
				break
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// mustBeOnline returns realtime.ErrPartyOffline unless user has a live session.
func (mm *Matchmaking) mustBeOnline(ctx context.Context, user string) error {
	st, err := mm.online.Get(ctx, user)
	if err != nil {
		return err
	}
	if !st.Online {
		return fmt.Errorf("%w: party member %s is not online", realtime.ErrPartyOffline, user)
	}
	return nil
}

// Status returns the status of ticket id in queue. Only its players may
// read it: for anyone else it is matchmaking.ErrUnknownTicket.
func (mm *Matchmaking) Status(ctx context.Context, p realtime.Principal, queue, id string) (matchmaking.Status, error) {
	st, err := mm.svc.Status(ctx, queue, id)
	if err != nil {
		return matchmaking.Status{}, err
	}
	if !playerOf(st.Ticket, p.User) {
		return matchmaking.Status{}, fmt.Errorf("matchmaking: status of %s in %s: %w", id, queue, matchmaking.ErrUnknownTicket)
	}
	return st, nil
}

// Cancel takes ticket id out of queue (any of its players may) and returns
// its status after: cancelled, or how it had ended before. A pending
// party is dissolved, and its players told (party_update: cancelled by its
// leader, declined by an invitee). It returns
// matchmaking.ErrUnknownTicket for a ticket that is not one of p's user.
func (mm *Matchmaking) Cancel(ctx context.Context, p realtime.Principal, queue, id string) (matchmaking.Status, error) {
	before, err := mm.Status(ctx, p, queue, id)
	if err != nil {
		return matchmaking.Status{}, err
	}
	if before.State == matchmaking.Pending {
		reason := matchmaking.ReasonCancelled
		if !strings.EqualFold(before.Ticket.User, p.User) {
			reason = matchmaking.ReasonDeclined
		}
		return mm.dissolve(ctx, queue, id, p.User, reason)
	}
	return mm.svc.Cancel(ctx, queue, id)
}

// Events returns what p's user was told about their tickets lately,
// newest first: the poll's match section.
func (mm *Matchmaking) Events(ctx context.Context, user string) ([]matchmaking.Event, error) {
	return mm.svc.Events(ctx, user)
}

// QueueInfo is one queue as the admin console shows it.
type QueueInfo struct {
	// Queue is the queue's name.
	Queue string `json:"queue"`
	// MinSize and MaxSize bound a match's players.
	MinSize int `json:"min"`
	MaxSize int `json:"max"`
	// Tickets is the number of waiting tickets.
	Tickets int64 `json:"tickets"`
	// OldestWaitSeconds is how long the oldest waiting ticket has waited.
	OldestWaitSeconds float64 `json:"oldest_wait_seconds"`
}

// Queues returns every defined queue with its depth and oldest wait. It
// returns Redis errors.
func (mm *Matchmaking) Queues(ctx context.Context) ([]QueueInfo, error) {
	qs := mm.svc.Queues()
	out := make([]QueueInfo, 0, len(qs))
	for _, q := range qs {
		d, err := mm.svc.Depth(ctx, q.Name)
		if err != nil {
			return nil, err
		}
		out = append(out, QueueInfo{Queue: q.Name, MinSize: q.MinSize, MaxSize: q.MaxSize, Tickets: d.Tickets,
			OldestWaitSeconds: d.OldestWait.Seconds()})
	}
	return out, nil
}

// Room is the id of a match's private room: in lobby
// matchmaking.MatchLobby, a room number made of the match's id and
// Config.MatchRoomKey (rooms.PrivateRoomSeq), so that nobody without the
// key can enumerate the rooms of matches, whose ids are sequential; room 1
// without a key.
func (mm *Matchmaking) Room(m matchmaking.Match) string {
	if len(mm.roomKey) == 0 {
		return matchmaking.MatchLobby(m) + "-1"
	}
	return matchmaking.MatchLobby(m) + "-" + strconv.Itoa(rooms.PrivateRoomSeq(mm.roomKey, m.ID))
}

func playerOf(t matchmaking.Ticket, user string) bool {
	return slices.ContainsFunc(t.Players(), func(u string) bool { return strings.EqualFold(u, user) })
}

// matched is the OnMatched hook (run by the queue's matcher, at least once
// per match): the match's private room — Room(m), the only room of lobby
// matchmaking.MatchLobby, the players' seats reserved for the queue's
// reserve_seconds — then every player is told. Idempotent: a second call
// finds the room and records each event once.
func (mm *Matchmaking) matched(ctx context.Context, m matchmaking.Match) error {
	reserve := 30 * time.Second // the default, for a queue removed since
	if q, err := mm.svc.Queue(m.Queue); err == nil {
		reserve = q.Reserve
	}
	room, err := mm.rooms.CreateRoom(ctx, mm.Room(m), m.Players, reserve)
	if err != nil {
		return fmt.Errorf("match: the room of match %s: %w", m.ID, err)
	}
	if room.ID != mm.Room(m) {
		return fmt.Errorf("match: the room of match %s is %s, not %s", m.ID, room.ID, mm.Room(m))
	}
	notes := matchmaking.MatchedEvents(m, room.ID, reserve)
	data, err := mm.matchHook(ctx, m, room.ID)
	if err != nil {
		return fmt.Errorf("match: the match hook of match %s: %w", m.ID, err)
	}
	for i := range notes {
		notes[i].Event.Data = data
	}
	return mm.tell(ctx, notes)
}

// expired is the OnExpired hook: the ticket's players are told. The
// event's time is when the ticket became due (created + max wait), not the
// hook's now, so that a hook run twice records one event.
func (mm *Matchmaking) expired(ctx context.Context, t matchmaking.Ticket) error {
	at := mm.now()
	if q, err := mm.svc.Queue(t.Queue); err == nil {
		at = t.Created.Add(q.MaxWait)
	}
	if !t.Expires.IsZero() {
		at = t.Expires // a party whose invitations lapsed
	}
	return mm.tell(ctx, []matchmaking.Notice{matchmaking.ExpiredEvent(t, at)})
}

// tell records and publishes the notices (every node delivers them to its
// connections: receive) and marks the players' REST sessions.
func (mm *Matchmaking) tell(ctx context.Context, notes []matchmaking.Notice) error {
	if err := mm.svc.Notify(ctx, notes); err != nil {
		return err
	}
	for _, n := range notes {
		for _, u := range n.Users {
			mm.marks.User(u, dirty.Of(dirty.Match))
		}
	}
	return nil
}

// receive hands the notices another node (or this one) published to this
// node's connections of the users they name, once (recent).
func (mm *Matchmaking) receive(_ string, p []byte) {
	if !mm.recent.first(p, time.Now()) {
		return
	}
	notes, err := matchmaking.DecodeNotices(p)
	if err != nil {
		mm.log.Debug("matchmaking notice", "err", err)
		return
	}
	for _, n := range notes {
		frame, err := json.Marshal(n.Event)
		if err != nil {
			continue
		}
		for _, u := range n.Users {
			for _, c := range mm.hub.UserClients(u) {
				c.Send(frame)
			}
		}
	}
}

// Start subscribes to the matchmaking channel (a match or an expiry told
// on any node reaches the players' clients here), then runs the matchers
// on the node's loops' context.
func (mm *Matchmaking) Start(ctx context.Context) error {
	if err := mm.node.Subscribe(ctx, mm.svc.Channel(), bus.HandlerFuncs{OnReceive: mm.receive}); err != nil {
		return fmt.Errorf("match: subscribe matchmaking: %w", err)
	}
	if err := mm.matchers.Start(mm.node.RunContext()); err != nil && !errors.Is(err, matchmaking.ErrStarted) {
		return fmt.Errorf("match: start matchmaking: %w", err)
	}
	return nil
}

// Shutdown stops the matchers, handing this node's queues over at once;
// a root runs it after the node's Drain, before its Shutdown.
func (mm *Matchmaking) Shutdown(ctx context.Context) error {
	if err := mm.matchers.Stop(ctx); err != nil {
		return fmt.Errorf("match: stop matchers: %w", err)
	}
	return nil
}
