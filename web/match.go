package web

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/match"
)

// matchAPI serves matchmaking tickets (Matchmaking), over HTTP and as
// the queue and dequeue frames of a WebSocket.
type matchAPI struct {
	match *match.Matchmaking
}

func (h *matchAPI) routes(api fiber.Router, a *authAPI) {
	user := a.requireUser
	api.Post("/matchmaking/:queue/tickets", user, h.submitTicket)
	api.Get("/matchmaking/:queue/tickets/:id", user, h.ticketStatus)
	api.Delete("/matchmaking/:queue/tickets/:id", user, h.cancelTicket)
	api.Post("/matchmaking/:queue/parties", user, h.inviteParty)
	api.Post("/matchmaking/:queue/tickets/:id/accept", user, h.acceptParty)
	api.Post("/matchmaking/:queue/tickets/:id/decline", user, h.declineParty)
}

// ticketOf is a ticket's status as the protocol shows it (HTTP and the
// queued/dequeued events alike).
func (h *matchAPI) ticketOf(st matchmaking.Status) protocol.Ticket {
	t := st.Ticket
	out := protocol.Ticket{ID: t.ID, Queue: t.Queue, User: t.User, Party: t.Party, Skill: t.Skill, Attributes: t.Attributes,
		Created: t.Created.UnixMilli(), State: string(st.State)}
	if !st.Ended.IsZero() {
		out.Ended = st.Ended.UnixMilli()
	}
	out.Accepted = t.Accepted
	if st.State == matchmaking.Pending {
		out.Expires = t.Expires.UnixMilli()
	}
	if !st.TroubleSince.IsZero() {
		out.TroubleSince = st.TroubleSince.UnixMilli()
	}
	if st.Match != nil {
		out.Match, out.Room, out.Players = st.Match.ID, h.match.Room(*st.Match), st.Match.Players
	}
	return out
}

// ticketBody is a ticket request: the body of POST …/tickets and the
// fields of a queue frame (protocol.Queue).
type ticketBody struct {
	Skill      *float64          `json:"skill"`
	Party      []string          `json:"party"`
	Attributes map[string]string `json:"attributes"`
}

func (b ticketBody) request() (match.TicketRequest, error) {
	if b.Skill == nil {
		return match.TicketRequest{}, errf(errcode.BadRequest, `send {"skill": 1500} (and optionally "party": ["user", …], "attributes": {"region": "eu"})`)
	}
	return match.TicketRequest{Skill: *b.Skill, Party: b.Party, Attributes: b.Attributes}, nil
}

func (h *matchAPI) submitTicket(c *fiber.Ctx) error {
	var b ticketBody
	if err := decodeJSON(c.Body(), &b); err != nil {
		return err
	}
	req, err := b.request()
	if err != nil {
		return err
	}
	st, err := h.match.Submit(c.UserContext(), principal(c), c.Params("queue"), req)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": h.ticketOf(st)})
}

func (h *matchAPI) ticketStatus(c *fiber.Ctx) error {
	st, err := h.match.Status(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": h.ticketOf(st)})
}

func (h *matchAPI) cancelTicket(c *fiber.Ctx) error {
	st, err := h.match.Cancel(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": h.ticketOf(st)})
}

// inviteParty forms a pending party: the caller leads, the party is
// invited; it queues once every member accepted.
func (h *matchAPI) inviteParty(c *fiber.Ctx) error {
	var b ticketBody
	if err := decodeJSON(c.Body(), &b); err != nil {
		return err
	}
	req, err := b.request()
	if err != nil {
		return err
	}
	st, err := h.match.Invite(c.UserContext(), principal(c), c.Params("queue"), req)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": h.ticketOf(st)})
}

func (h *matchAPI) acceptParty(c *fiber.Ctx) error {
	st, err := h.match.Accept(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": h.ticketOf(st)})
}

func (h *matchAPI) declineParty(c *fiber.Ctx) error {
	st, err := h.match.Decline(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": h.ticketOf(st)})
}

// queueFrame runs a queue frame: the ticket's status comes back as a
// queued event with the frame's ref.
func (h *matchAPI) queueFrame(ctx context.Context, c *realtime.Client, f protocol.Frame) error {
	req, err := ticketBody{Skill: f.Skill, Party: f.Party, Attributes: f.Attributes}.request()
	if err != nil {
		return err
	}
	st, err := h.match.Submit(ctx, c.Principal(), f.Queue, req)
	if err != nil {
		return err
	}
	c.SendEvent(protocol.Queued{Ref: f.Ref, Ticket: h.ticketOf(st)})
	return nil
}

// dequeueFrame runs a dequeue frame: the ticket's status after comes back
// as a dequeued event.
func (h *matchAPI) dequeueFrame(ctx context.Context, c *realtime.Client, f protocol.Frame) error {
	st, err := h.match.Cancel(ctx, c.Principal(), f.Queue, f.Ticket)
	if err != nil {
		return err
	}
	c.SendEvent(protocol.Dequeued{Ref: f.Ref, Ticket: h.ticketOf(st)})
	return nil
}

// partyFrame runs an invite, accept or decline frame: the party's ticket
// comes back as a party event with the frame's ref.
func (h *matchAPI) partyFrame(ctx context.Context, c *realtime.Client, f protocol.Frame) error {
	var st matchmaking.Status
	var err error
	switch f.Type {
	case "invite":
		req, rerr := ticketBody{Skill: f.Skill, Party: f.Party, Attributes: f.Attributes}.request()
		if rerr != nil {
			return rerr
		}
		st, err = h.match.Invite(ctx, c.Principal(), f.Queue, req)
	case "accept":
		st, err = h.match.Accept(ctx, c.Principal(), f.Queue, f.Ticket)
	default:
		st, err = h.match.Decline(ctx, c.Principal(), f.Queue, f.Ticket)
	}
	if err != nil {
		return err
	}
	c.SendEvent(protocol.Party{Ref: f.Ref, Ticket: h.ticketOf(st)})
	return nil
}
