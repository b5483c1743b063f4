package web

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/rooms"
)

// chatRoutes are the second wave's chat endpoints: lobbies, unread counts,
// read marks, moderation and message removal.
func (s *Server) chatRoutes(api fiber.Router, user, admin fiber.Handler) {
	reader := s.requireReader
	api.Get("/lobbies", reader, s.listLobbies)
	api.Get("/unread", user, s.unread)
	api.Post("/rooms/:room/read", user, s.markRead)
	api.Post("/rooms/:room/typing", user, s.postTyping)
	api.Delete("/rooms/:room/messages/:id", admin, s.removeMessage)

	api.Get("/moderation", s.requireAdminRead, s.listModeration)
	api.Post("/moderation/kick", admin, s.kick)
	api.Post("/moderation/mute", admin, s.mute)
	api.Post("/moderation/ban", admin, s.ban)
	api.Delete("/moderation/mute/:user", admin, s.unmute)
	api.Delete("/moderation/ban/:user", admin, s.unban)
}

func (s *Server) listLobbies(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", rooms.DefaultLobbiesLimit, 1, rooms.MaxLobbiesLimit)
	if err != nil {
		return err
	}
	ls, err := s.chat.Lobbies(c.UserContext(), limit)
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(ls))
	for _, l := range ls {
		out = append(out, fiber.Map{"lobby": l.Lobby, "online": l.Online, "rooms": l.Rooms})
	}
	return c.JSON(fiber.Map{"lobbies": out})
}

func (s *Server) unread(c *fiber.Ctx) error {
	counts, err := s.chat.Unread(c.UserContext(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"rooms": counts})
}

// postTyping relays a typing indicator of a REST or event-stream session
// (the WebSocket sends a typing frame instead); at most one per user and
// room every realtime.TypingEvery is relayed, the rest answer ok silently.
func (s *Server) postTyping(c *fiber.Ctx) error {
	if err := s.chat.TypingREST(c.UserContext(), principal(c), c.Params("room")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) markRead(c *fiber.Ctx) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.ID == "" {
		return errf(errcode.BadRequest, `send {"id": "<message id>"}: the last message read`)
	}
	if err := s.chat.Read(c.UserContext(), principal(c), c.Params("room"), req.ID); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) removeMessage(c *fiber.Ctx) error {
	room, id := c.Params("room"), c.Params("id")
	if err := s.admin.RemoveMessage(c.UserContext(), room, id); err != nil {
		return err
	}
	s.log.Info("admin removed a message", "room", room, "id", id, "from", s.clientIP(c))
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) listModeration(c *fiber.Ctx) error {
	mutes, bans, err := s.mod.List(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"mutes": entriesOf(mutes), "bans": entriesOf(bans)})
}

func entriesOf(es []moderation.Entry) []fiber.Map {
	out := make([]fiber.Map, 0, len(es))
	for _, e := range es {
		out = append(out, fiber.Map{"user": e.User, "until": e.Until.UTC().Format(time.RFC3339), "reason": e.Reason})
	}
	return out
}

type modReq struct {
	User    string `json:"user"`
	Seconds *int64 `json:"seconds"`
	Reason  string `json:"reason"`
}

func (s *Server) decodeMod(c *fiber.Ctx, needSeconds bool) (modReq, time.Duration, error) {
	var req modReq
	if err := decodeJSON(c.Body(), &req); err != nil {
		return req, 0, err
	}
	if !needSeconds {
		return req, 0, nil
	}
	max := int64(moderation.MaxDuration / time.Second)
	if req.Seconds == nil || *req.Seconds < 1 || *req.Seconds > max {
		got := "nothing"
		if req.Seconds != nil {
			got = itoa64(*req.Seconds)
		}
		return req, 0, errf(errcode.BadRequest, "seconds must be an integer from 1 to %d; got %s", max, got)
	}
	return req, time.Duration(*req.Seconds) * time.Second, nil
}

func (s *Server) kick(c *fiber.Ctx) error {
	req, _, err := s.decodeMod(c, false)
	if err != nil {
		return err
	}
	if err := s.mod.Kick(c.UserContext(), req.User, req.Reason); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) mute(c *fiber.Ctx) error {
	req, d, err := s.decodeMod(c, true)
	if err != nil {
		return err
	}
	until, err := s.mod.Mute(c.UserContext(), req.User, d, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"until": until.UTC().Format(time.RFC3339)})
}

func (s *Server) ban(c *fiber.Ctx) error {
	req, d, err := s.decodeMod(c, true)
	if err != nil {
		return err
	}
	until, err := s.mod.Ban(c.UserContext(), req.User, d, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"until": until.UTC().Format(time.RFC3339)})
}

func (s *Server) unmute(c *fiber.Ctx) error {
	if err := s.mod.Unmute(c.UserContext(), c.Params("user")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) unban(c *fiber.Ctx) error {
	if err := s.mod.Unban(c.UserContext(), c.Params("user")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}
