package matchmaking

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/names"
)

// The types of Event.
const (
	EventMatched = "matched"
	EventExpired = "ticket_expired"
	// EventPartyInvite tells an invitee of a party they may accept or
	// decline (by the ticket's id) until Expires.
	EventPartyInvite = "party_invite"
	// EventPartyUpdate tells a party's players that a member accepted
	// (State pending, or waiting once all did) or that the party was
	// dissolved before it queued (State cancelled; Reason says why).
	EventPartyUpdate = "party_update"
)

// The reasons of a party_update event.
const (
	ReasonAccepted  = "accepted"  // User accepted
	ReasonDeclined  = "declined"  // User declined: the party is dissolved
	ReasonCancelled = "cancelled" // the leader cancelled it
	ReasonOffline   = "offline"   // User was not online when a member accepted
)

// MaxUserEvents is how many events Events keeps per user, newest first.
const MaxUserEvents = 20

// Event is what a user is told about one of their tickets: matched, with
// the match and the room the players meet in, or expired. Its JSON is the
// WebSocket event and an entry of the poll's match section
// (docs/PROTOCOL.md).
type Event struct {
	// Type is EventMatched or EventExpired.
	Type string `json:"type"`
	// Queue is the ticket's queue.
	Queue string `json:"queue"`
	// Ticket is the ticket's id (a party shares its ticket).
	Ticket string `json:"ticket"`
	// Match is the match's id (matched only).
	Match string `json:"match,omitempty"`
	// Room is the private room the players meet in (matched only): join
	// or resume it by this id.
	Room string `json:"room,omitempty"`
	// Players lists every matched user (matched only).
	Players []string `json:"players,omitempty"`
	// ReserveSeconds is how long the room holds a player's seat for them
	// (matched only).
	ReserveSeconds int `json:"reserve_seconds,omitempty"`
	// Data is what the application's match hook attached to the match
	// (matched only; package hooks): the same for every player.
	Data json.RawMessage `json:"data,omitempty"`
	// Leader is the party's leader, who invited (party events).
	Leader string `json:"leader,omitempty"`
	// State is the ticket's state after a party_update: pending, waiting
	// (every invitee accepted: it is queued) or cancelled.
	State State `json:"state,omitempty"`
	// User is the member who acted (party_update).
	User string `json:"user,omitempty"`
	// Reason is what happened (party_update): accepted, declined,
	// cancelled or offline.
	Reason string `json:"reason,omitempty"`
	// Accepted lists the invitees who accepted so far (party events).
	Accepted []string `json:"accepted,omitempty"`
	// Expires is when a pending party's invitations lapse, unix ms
	// (party_invite).
	Expires int64 `json:"expires,omitempty"`
	// TS is when the match formed, the ticket expired or the party
	// changed, unix ms.
	TS int64 `json:"ts"`
}

// Notice is one Event for the users it concerns (a ticket's user and
// party).
type Notice struct {
	// Users are the players the event is for.
	Users []string `json:"users"`
	// Event is what they are told.
	Event Event `json:"event"`
}

// MatchedEvents returns the notices of a formed match: one per ticket, for
// the ticket's players, naming room and the seats' reservation.
func MatchedEvents(m Match, room string, reserve time.Duration) []Notice {
	out := make([]Notice, 0, len(m.Tickets))
	for _, t := range m.Tickets {
		out = append(out, Notice{Users: t.Players(), Event: Event{Type: EventMatched, Queue: m.Queue, Ticket: t.ID,
			Match: m.ID, Room: room, Players: m.Players, ReserveSeconds: int(reserve / time.Second), TS: m.Created.UnixMilli()}})
	}
	return out
}

// ExpiredEvent returns the notice of a ticket that expired at at.
func ExpiredEvent(t Ticket, at time.Time) Notice {
	return Notice{Users: t.Players(), Event: Event{Type: EventExpired, Queue: t.Queue, Ticket: t.ID, TS: at.UnixMilli()}}
}

// PartyInviteEvent returns the notice of a pending party for its
// invitees.
func PartyInviteEvent(st Status) Notice {
	t := st.Ticket
	return Notice{Users: t.Party, Event: Event{Type: EventPartyInvite, Queue: t.Queue, Ticket: t.ID, Leader: t.User,
		Players: t.Players(), State: st.State, Accepted: t.Accepted, Expires: t.Expires.UnixMilli(), TS: t.Created.UnixMilli()}}
}

// PartyUpdateEvent returns the notice, for every player of the party, that
// user did reason at at, leaving the party in st.
func PartyUpdateEvent(st Status, user, reason string, at time.Time) Notice {
	t := st.Ticket
	return Notice{Users: t.Players(), Event: Event{Type: EventPartyUpdate, Queue: t.Queue, Ticket: t.ID, Leader: t.User,
		Players: t.Players(), State: st.State, User: user, Reason: reason, Accepted: t.Accepted, TS: at.UnixMilli()}}
}

// Notify records each notice's event for its users (Events) and publishes
// the notices on Channel for every node, in one pipeline. It is
// idempotent: an event recorded already (the hooks may run twice) is not
// recorded twice. The same payload may be published twice (a hook run
// again, or the Redis client's retry of the pipeline after a late answer):
// the same bytes are the same notices, and a subscriber delivers them once.
// It returns Redis errors.
func (s *Service) Notify(ctx context.Context, notes []Notice) error {
	if len(notes) == 0 {
		return nil
	}
	payload, err := json.Marshal(notes)
	if err != nil {
		return fmt.Errorf("matchmaking: notify: %w", err)
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, n := range notes {
			ev, _ := json.Marshal(n.Event) // strings and numbers: cannot fail
			for _, u := range n.Users {
				k := userEvents(s.ks, u)
				p.LRem(ctx, k, 0, ev)
				p.LPush(ctx, k, ev)
				p.LTrim(ctx, k, 0, MaxUserEvents-1)
				p.PExpire(ctx, k, s.statusTTL)
			}
		}
		p.Publish(ctx, eventsChannel(s.ks), payload)
		return nil
	})
	if err != nil {
		return fmt.Errorf("matchmaking: notify %d: %w", len(notes), err)
	}
	return nil
}

// Events returns the events recorded for user within the status TTL,
// newest first (at most MaxUserEvents). It returns an error wrapping
// names.ErrBadName, and Redis errors.
func (s *Service) Events(ctx context.Context, user string) ([]Event, error) {
	if err := names.User(user); err != nil {
		return nil, fmt.Errorf("matchmaking: events of %s: %w", clip(user), err)
	}
	raw, err := s.rdb.LRange(ctx, userEvents(s.ks, user), 0, MaxUserEvents-1).Result()
	if err != nil {
		return nil, fmt.Errorf("matchmaking: events of %s: %w", user, err)
	}
	out := make([]Event, 0, len(raw))
	for _, r := range raw {
		var ev Event
		if json.Unmarshal([]byte(r), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out, nil
}

// Channel is the pub/sub channel Notify publishes on: JSON []Notice.
func (s *Service) Channel() string { return eventsChannel(s.ks) }

// DecodeNotices decodes a message of Channel.
func DecodeNotices(p []byte) ([]Notice, error) {
	var out []Notice
	if err := json.Unmarshal(p, &out); err != nil {
		return nil, fmt.Errorf("matchmaking: notice of %d bytes: %w", len(p), err)
	}
	return out, nil
}

// MatchLobby is the lobby of a match's private room: "mm.<queue>.<seq>",
// a name no user joins (package rooms refuses a lobby join of a private
// room, and realtime any lobby join under "mm.").
func MatchLobby(m Match) string { return "mm." + m.Queue + "." + strconv.FormatInt(m.Seq, 10) }
