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
	// Party lists the other users who play with the caller (all online);
	// they are matched together or not at all.
	Party []string `json:"party,omitempty"`
	// Attributes must be equal for tickets to match (region, mode).
	Attributes map[string]string `json:"attributes,omitempty"`
}

// Ticket is a matchmaking ticket's status (the protocol's Ticket): State
// is "waiting", "matched", "expired" or "cancelled"; times are unix ms.
// TroubleSince, on a waiting ticket only: the queue's matcher has failed
// round after round since then, so no match forms until it recovers (the
// ticket still expires at the max wait). Match, Room and Players are set
// once matched: join Room with JoinRoom (or a WebSocket resume) within the
// queue's reservation.
type Ticket = protocol.Ticket

// MatchEvent is what a player is told about a ticket: Type "matched"
// (with the room to join) or "ticket_expired"; the poll's match section.
type MatchEvent struct {
	Type           string   `json:"type"`
	Queue          string   `json:"queue"`
	Ticket         string   `json:"ticket"`
	Match          string   `json:"match,omitempty"`
	Room           string   `json:"room,omitempty"`
	Players        []string `json:"players,omitempty"`
	ReserveSeconds int      `json:"reserve_seconds,omitempty"`
	TS             int64    `json:"ts"` // unix ms
}

// SubmitTicket queues the caller (and req.Party) for a match in queue and
// returns the ticket as read just after the submission: waiting, or
// already matched (with its room) when a match formed at once. It is not
// retried after an unknown outcome (a repeat would be refused ticket_open,
// naming the first ticket). The server's refusals: unknown_queue,
// ticket_open, conflict (a party member is not online), bad_value,
// bad_name.
func (c *Client) SubmitTicket(ctx context.Context, queue string, req TicketRequest) (Ticket, error) {
	var out struct {
		Ticket Ticket `json:"ticket"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("matchmaking", queue, "tickets"), body: req, out: &out})
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
