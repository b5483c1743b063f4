package web

import (
	"context"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
)

func (s *Server) matchRoutes(api fiber.Router, user, admin fiber.Handler) {
	api.Post("/matchmaking/:queue/tickets", user, s.submitTicket)
	api.Get("/matchmaking/:queue/tickets/:id", user, s.ticketStatus)
	api.Delete("/matchmaking/:queue/tickets/:id", user, s.cancelTicket)
	api.Get("/matchmaking/queues", admin, s.listQueues)
	api.Post("/rooms/:room/join", user, s.joinRoom)
}

// ticketOf is a ticket's status as the protocol shows it (HTTP and the
// queued/dequeued events alike).
func (s *Server) ticketOf(st matchmaking.Status) protocol.Ticket {
	t := st.Ticket
	out := protocol.Ticket{ID: t.ID, Queue: t.Queue, User: t.User, Party: t.Party, Skill: t.Skill, Attributes: t.Attributes,
		Created: t.Created.UnixMilli(), State: string(st.State)}
	if !st.Ended.IsZero() {
		out.Ended = st.Ended.UnixMilli()
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
// fields of a queue frame (protocol.Queue).
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
func (s *Server) queueFrame(ctx context.Context, c *realtime.Client, f protocol.Frame) error {
	req, err := ticketBody{Skill: f.Skill, Party: f.Party, Attributes: f.Attributes}.request()
	if err != nil {
		return err
	}
	st, err := s.match.Submit(ctx, c.Principal(), f.Queue, req)
	if err != nil {
		return err
	}
	c.SendEvent(protocol.Queued{Ref: f.Ref, Ticket: s.ticketOf(st)})
	return nil
}

// dequeueFrame runs a dequeue frame: the ticket's status after comes back
// as a dequeued event.
func (s *Server) dequeueFrame(ctx context.Context, c *realtime.Client, f protocol.Frame) error {
	st, err := s.match.Cancel(ctx, c.Principal(), f.Queue, f.Ticket)
	if err != nil {
		return err
	}
	c.SendEvent(protocol.Dequeued{Ref: f.Ref, Ticket: s.ticketOf(st)})
	return nil
}
