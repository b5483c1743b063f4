package web

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/realtime"
)

func (s *Server) matchRoutes(api fiber.Router, user, admin fiber.Handler) {
	api.Post("/matchmaking/:queue/tickets", user, s.submitTicket)
	api.Get("/matchmaking/:queue/tickets/:id", user, s.ticketStatus)
	api.Delete("/matchmaking/:queue/tickets/:id", user, s.cancelTicket)
	api.Post("/matchmaking/:queue/parties", user, s.inviteParty)
	api.Post("/matchmaking/:queue/tickets/:id/accept", user, s.acceptParty)
	api.Post("/matchmaking/:queue/tickets/:id/decline", user, s.declineParty)
	api.Get("/matchmaking/queues", admin, s.listQueues)
	api.Post("/rooms/:room/join", user, s.joinRoom)
}

// ticketJSON is a ticket's status as the protocol shows it (HTTP and the
// queued/dequeued frames alike).
type ticketJSON struct {
	ID         string            `json:"id"`
	Queue      string            `json:"queue"`
	User       string            `json:"user"`
	Party      []string          `json:"party,omitempty"`
	Skill      float64           `json:"skill"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Created    int64             `json:"created"`
	State      matchmaking.State `json:"state"`
	Ended      int64             `json:"ended,omitempty"`
	// TroubleSince: the queue's matcher has failed since then (waiting
	// tickets only).
	TroubleSince int64    `json:"trouble_since,omitempty"`
	Match        string   `json:"match,omitempty"`
	Room         string   `json:"room,omitempty"`
	Players      []string `json:"players,omitempty"`
	// Accepted and Expires: a party's invitees who accepted, and (while
	// pending) when its invitations lapse.
	Accepted []string `json:"accepted,omitempty"`
	Expires  int64    `json:"expires,omitempty"`
}

func (s *Server) ticketOf(st matchmaking.Status) ticketJSON {
	t := st.Ticket
	out := ticketJSON{ID: t.ID, Queue: t.Queue, User: t.User, Party: t.Party, Skill: t.Skill, Attributes: t.Attributes,
		Created: t.Created.UnixMilli(), State: st.State}
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
		out.Match, out.Room, out.Players = st.Match.ID, s.match.Room(*st.Match), st.Match.Players
	}
	return out
}

// ticketBody is a ticket request: the body of POST …/tickets and the
// fields of a queue frame.
type ticketBody struct {
	Skill      *float64          `json:"skill"`
	Party      []string          `json:"party"`
	Attributes map[string]string `json:"attributes"`
}

func (b ticketBody) request() (realtime.TicketRequest, error) {
	if b.Skill == nil {
		return realtime.TicketRequest{}, errf(errcode.BadRequest, `send {"skill": 1500} (and optionally "party": ["user", …], "attributes": {"region": "eu"})`)
	}
	return realtime.TicketRequest{Skill: *b.Skill, Party: b.Party, Attributes: b.Attributes}, nil
}

func (s *Server) submitTicket(c *fiber.Ctx) error {
	var b ticketBody
	if err := decodeJSON(c.Body(), &b); err != nil {
		return err
	}
	req, err := b.request()
	if err != nil {
		return err
	}
	st, err := s.match.Submit(c.UserContext(), principal(c), c.Params("queue"), req)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": s.ticketOf(st)})
}

func (s *Server) ticketStatus(c *fiber.Ctx) error {
	st, err := s.match.Status(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": s.ticketOf(st)})
}

func (s *Server) cancelTicket(c *fiber.Ctx) error {
	st, err := s.match.Cancel(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": s.ticketOf(st)})
}

// inviteParty forms a pending party: the caller leads, the party is
// invited; it queues once every member accepted.
func (s *Server) inviteParty(c *fiber.Ctx) error {
	var b ticketBody
	if err := decodeJSON(c.Body(), &b); err != nil {
		return err
	}
	req, err := b.request()
	if err != nil {
		return err
	}
	st, err := s.match.Invite(c.UserContext(), principal(c), c.Params("queue"), req)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": s.ticketOf(st)})
}

func (s *Server) acceptParty(c *fiber.Ctx) error {
	st, err := s.match.Accept(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": s.ticketOf(st)})
}

func (s *Server) declineParty(c *fiber.Ctx) error {
	st, err := s.match.Decline(c.UserContext(), principal(c), c.Params("queue"), c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ticket": s.ticketOf(st)})
}

func (s *Server) listQueues(c *fiber.Ctx) error {
	qs, err := s.admin.Queues(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"queues": qs})
}

// joinRoom takes a REST session into a room by its id: a match's room, or
// back into a room whose seat lapsed.
func (s *Server) joinRoom(c *fiber.Ctx) error {
	room, err := s.chat.JoinRoomREST(c.UserContext(), principal(c), c.Params("room"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": room})
}

// queueFrame runs a queue frame: the ticket's status comes back as a
// queued event with the frame's ref.
func (s *Server) queueFrame(ctx context.Context, c *realtime.Client, f inFrame) error {
	req, err := f.ticketBody.request()
	if err != nil {
		return err
	}
	st, err := s.match.Submit(ctx, c.Principal(), f.Queue, req)
	if err != nil {
		return err
	}
	c.SendJSON(map[string]any{"type": "queued", "ref": f.Ref, "ticket": s.ticketOf(st)})
	return nil
}

// dequeueFrame runs a dequeue frame: the ticket's status after comes back
// as a dequeued event.
func (s *Server) dequeueFrame(ctx context.Context, c *realtime.Client, f inFrame) error {
	st, err := s.match.Cancel(ctx, c.Principal(), f.Queue, f.Ticket)
	if err != nil {
		return err
	}
	c.SendJSON(map[string]any{"type": "dequeued", "ref": f.Ref, "ticket": s.ticketOf(st)})
	return nil
}

// partyFrame runs an invite, accept or decline frame: the party's ticket
// comes back as a party event with the frame's ref.
func (s *Server) partyFrame(ctx context.Context, c *realtime.Client, f inFrame) error {
	var st matchmaking.Status
	var err error
	switch f.Type {
	case "invite":
		req, rerr := f.ticketBody.request()
		if rerr != nil {
			return rerr
		}
		st, err = s.match.Invite(ctx, c.Principal(), f.Queue, req)
	case "accept":
		st, err = s.match.Accept(ctx, c.Principal(), f.Queue, f.Ticket)
	default:
		st, err = s.match.Decline(ctx, c.Principal(), f.Queue, f.Ticket)
	}
	if err != nil {
		return err
	}
	c.SendJSON(map[string]any{"type": "party", "ref": f.Ref, "ticket": s.ticketOf(st)})
	return nil
}
