package client

import (
	"context"
	"net/http"

	"github.com/chatd/chatd/protocol"
)

// TicketRequest asks for a match (docs/PROTOCOL.md, "Matchmaking").
type TicketRequest struct {
	// Skill is the rating the match is made on: |Skill| ≤ 1e9.
	Skill float64 `json:"skill"`
	// Party lists the users invited to play with the caller (InviteParty
	// only; each online): they are matched together or not at all, once
	// every one accepted. SubmitTicket with a party is refused
	// consent_required.
	Party []string `json:"party,omitempty"`
	// Attributes must be equal for tickets to match (region, mode).
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Ticket is a matchmaking ticket's status (the protocol's Ticket): State
// is "pending" (a party whose invitations are not all accepted: in no
// queue), "waiting", "matched", "expired" or "cancelled"; times are unix
// ms. Accepted lists a party's invitees who accepted (canonical names);
// Expires, on a pending party, when its invitations lapse.
// TroubleSince, on a waiting ticket only: the queue's matcher has failed
// round after round since then, so no match forms until it recovers (the
// ticket still expires at the max wait). Match, Room and Players are set
// once matched: join Room with JoinRoom (or a WebSocket resume) within the
// queue's reservation.
type Ticket = protocol.Ticket

// MatchEvent is what a player is told about a ticket: Type "matched"
// (with the room to join), "ticket_expired", "party_invite" (accept or
// decline Ticket with AcceptParty, DeclineParty before Expires) or
// "party_update" (User accepted or the party was dissolved: State,
// Reason); the poll's match section.
type MatchEvent struct {
	Type           string   `json:"type"`
	Queue          string   `json:"queue"`
	Ticket         string   `json:"ticket"`
	Match          string   `json:"match,omitempty"`
	Room           string   `json:"room,omitempty"`
	Players        []string `json:"players,omitempty"`
	ReserveSeconds int      `json:"reserve_seconds,omitempty"`
	Leader         string   `json:"leader,omitempty"`
	State          string   `json:"state,omitempty"`
	User           string   `json:"user,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	Accepted       []string `json:"accepted,omitempty"`
	Expires        int64    `json:"expires,omitempty"` // unix ms
	TS             int64    `json:"ts"`                // unix ms
}

// SubmitTicket queues the caller (and req.Party) for a match in queue and
// returns the ticket as read just after the submission: waiting, or
// already matched (with its room) when a match formed at once. It is not
// retried after an unknown outcome (a repeat would be refused ticket_open,
// naming the first ticket). The server's refusals: unknown_queue,
// ticket_open, consent_required (req.Party is not empty: use
// InviteParty), bad_value, bad_name.
func (c *Client) SubmitTicket(ctx context.Context, queue string, req TicketRequest) (Ticket, error) {
	var out struct {
		Ticket Ticket `json:"ticket"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("matchmaking", queue, "tickets"), body: req, out: &out})
	return out.Ticket, err
}

// InviteParty forms a party in queue: the caller leads, req.Party are
// invited (each gets a party_invite event) and the ticket, pending, is
// queued once every one accepted (AcceptParty). It is not retried (a
// repeat invites again). The server's refusals: unknown_queue, conflict
// (an invitee is not online), bad_value (the caller named in any case, a
// user twice, too many), bad_name.
func (c *Client) InviteParty(ctx context.Context, queue string, req TicketRequest) (Ticket, error) {
	var out struct {
		Ticket Ticket `json:"ticket"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("matchmaking", queue, "parties"), body: req, out: &out})
	return out.Ticket, err
}

// AcceptParty accepts the caller's invitation to party id in queue and
// returns its ticket: pending, or waiting once every invitee accepted.
// Refusals: unknown_ticket (not invited), conflict (no longer pending, or
// a player is not online), ticket_open.
func (c *Client) AcceptParty(ctx context.Context, queue, id string) (Ticket, error) {
	var out struct {
		Ticket Ticket `json:"ticket"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("matchmaking", queue, "tickets", id, "accept"), out: &out, safe: true})
	return out.Ticket, err
}

// DeclineParty declines the caller's invitation to party id in queue: the
// party is dissolved. unknown_ticket when not invited.
func (c *Client) DeclineParty(ctx context.Context, queue, id string) (Ticket, error) {
	var out struct {
		Ticket Ticket `json:"ticket"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("matchmaking", queue, "tickets", id, "decline"), out: &out, safe: true})
	return out.Ticket, err
}

// Ticket returns the status of ticket id in queue (unknown_ticket for a
// ticket that is not the caller's).
func (c *Client) Ticket(ctx context.Context, queue, id string) (Ticket, error) {
	var out struct {
		Ticket Ticket `json:"ticket"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("matchmaking", queue, "tickets", id), out: &out, safe: true})
	return out.Ticket, err
}

// CancelTicket cancels ticket id in queue and returns its state after:
// cancelled, or how it had ended before.
func (c *Client) CancelTicket(ctx context.Context, queue, id string) (Ticket, error) {
	var out struct {
		Ticket Ticket `json:"ticket"`
	}
	err := c.do(ctx, call{method: http.MethodDelete, path: path("matchmaking", queue, "tickets", id), out: &out, safe: true})
	return out.Ticket, err
}

// JoinRoom takes the caller's REST session into a room by its id (a
// match's room, or back after a seat lapsed); the room joins the session's
// polls.
func (c *Client) JoinRoom(ctx context.Context, room string) (Room, error) {
	var out struct {
		Room Room `json:"room"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("rooms", room, "join"), out: &out, safe: true})
	return out.Room, err
}
