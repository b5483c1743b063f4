package web

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
)

func (s *Server) apiRoutes(api fiber.Router) {
	user, admin, reader := s.requireUser, s.requireAdmin, s.requireReader

	api.Post("/lobbies/:lobby/join", user, s.joinLobby)
	api.Get("/lobbies/:lobby/rooms", reader, s.listRooms)
	api.Get("/rooms/:room", reader, s.getRoom)
	api.Post("/rooms/:room/leave", user, s.leaveRoom)
	api.Post("/rooms/:room/messages", user, s.postMessage)
	api.Get("/rooms/:room/messages", reader, s.listMessages)

	api.Get("/presence/:user", reader, s.getPresence)
	api.Get("/nodes", s.requireAdminRead, s.listNodes) // internal addresses: not for users
	api.Get("/stats", reader, s.getStats)

	api.Get("/settings", reader, s.getSettings)
	api.Get("/settings/defs", reader, s.getSettingDefs)
	api.Put("/settings/:key", admin, s.putSetting)
	api.Delete("/settings/:key", admin, s.deleteSetting)
	api.Post("/notices", admin, s.postNotice)

	s.gameRoutes(api, user, admin)
	s.chatRoutes(api, user, admin)
	s.adminRoutes(api, s.requireAdminRead, admin)
	s.matchRoutes(api, user, s.requireAdminRead)
	api.Get("/poll", user, s.poll)
}

func (s *Server) joinLobby(c *fiber.Ctx) error {
	room, err := s.chat.JoinREST(c.UserContext(), principal(c), c.Params("lobby"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": room})
}

func (s *Server) leaveRoom(c *fiber.Ctx) error {
	if err := s.chat.LeaveREST(c.UserContext(), principal(c), c.Params("room")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) listRooms(c *fiber.Ctx) error {
	rs, err := s.chat.Rooms(c.UserContext(), viewer(c), c.Params("lobby"))
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []rooms.Room{}
	}
	return c.JSON(fiber.Map{"rooms": rs})
}

func (s *Server) getRoom(c *fiber.Ctx) error {
	if err := s.chat.CanSee(c.UserContext(), viewer(c), c.Params("room")); err != nil {
		return err
	}
	r, err := s.chat.Room(c.UserContext(), c.Params("room"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": r})
}

// postMessage sends a message; an Idempotency-Key makes a retry of the
// same post answer the first message and send nothing.
func (s *Server) postMessage(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	msg, err := s.chat.Post(c.UserContext(), principal(c), c.Params("room"), req.Text, key)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"message": msg})
}

// idempotencyKey reads the Idempotency-Key header: 1 to 128 printable
// ASCII characters, or none.
func idempotencyKey(c *fiber.Ctx) (string, error) {
	k := c.Get("Idempotency-Key")
	if len(k) > 128 {
		return "", errf(errcode.BadRequest, "Idempotency-Key is longer than 128 characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", errf(errcode.BadRequest, "Idempotency-Key may only hold printable ASCII characters")
		}
	}
	return k, nil
}

func (s *Server) listMessages(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", rooms.DefaultHistoryLimit, 1, rooms.MaxHistoryLimit)
	if err != nil {
		return err
	}
	if err := s.chat.CanSee(c.UserContext(), viewer(c), c.Params("room")); err != nil {
		return err
	}
	// a page is read and built while holding one of Config.MaxHistoryBuilds
	// slots: what a node holds for histories at once is bounded whatever
	// the number of readers (40 slow readers of 1,000 messages of 12 KB
	// each took a node from 27 to 1,207 MiB)
	select {
	case s.histories <- struct{}{}:
	case <-c.UserContext().Done():
		return c.UserContext().Err()
	}
	defer func() { <-s.histories }()
	msgs, err := s.chat.History(c.UserContext(), c.Params("room"), c.Query("after"), limit)
	if err != nil {
		return err
	}
	return sendHistory(c, msgs)
}

// sendHistory answers {"messages": [...], "more"?: true} within
// realtime.MaxHistoryBytes: the page ends at the last message that fits
// and "more" says to ask again after its id. The body is built once, in a
// buffer of its own handed to fasthttp as is (SetBodyRaw), so no response
// buffer pooled by fasthttp grows to the size of a history.
func sendHistory(c *fiber.Ctx, msgs []rooms.Message) error {
	body := make([]byte, 0, 256)
	body = append(body, `{"messages":[`...)
	more := false
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if i > 0 && len(body)+1+len(b) > realtime.MaxHistoryBytes {
			more = true
			break
		}
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, b...)
	}
	body = append(body, ']')
	if more {
		body = append(body, `,"more":true`...)
	}
	body = append(body, '}')
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Response().SetBodyRaw(body)
	return nil
}

func (s *Server) getPresence(c *fiber.Ctx) error {
	st, err := s.chat.Presence(c.UserContext(), viewer(c), c.Params("user"))
	if err != nil {
		return err
	}
	return c.JSON(presenceOf(st))
}

func (s *Server) listNodes(c *fiber.Ctx) error {
	ns, err := s.admin.Nodes(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(ns))
	now := s.cfg.Now()
	for _, n := range ns {
		m := fiber.Map{"id": n.ID, "addr": n.Addr, "connections": n.Connections, "last_heartbeat": n.LastHeartbeat.UTC().Format(time.RFC3339),
			"version": n.Version, "started_at": nil, "uptime_seconds": 0, "cpu": n.CPU, "memory_bytes": n.MemoryBytes,
			"heap_bytes": n.HeapBytes, "goroutines": n.Goroutines}
		if !n.StartedAt.IsZero() {
			m["started_at"] = n.StartedAt.UTC().Format(time.RFC3339)
			m["uptime_seconds"] = max(int64(now.Sub(n.StartedAt)/time.Second), 0)
		}
		out = append(out, m)
	}
	return c.JSON(fiber.Map{"nodes": out})
}

func (s *Server) getStats(c *fiber.Ctx) error {
	st, err := s.admin.Stats(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(st)
}

func (s *Server) getSettings(c *fiber.Ctx) error {
	v, vals := s.admin.Settings()
	return c.JSON(fiber.Map{"version": v, "values": vals})
}

func (s *Server) getSettingDefs(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"settings": s.admin.SettingDefs()})
}

func (s *Server) putSetting(c *fiber.Ctx) error {
	var req struct {
		Value *json.RawMessage `json:"value"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.Value == nil {
		return errf(errcode.BadRequest, `send {"value": …}`)
	}
	v, err := s.admin.SetSetting(c.UserContext(), c.Params("key"), *req.Value)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"version": v})
}

func (s *Server) deleteSetting(c *fiber.Ctx) error {
	v, err := s.admin.ResetSetting(c.UserContext(), c.Params("key"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"version": v})
}

func (s *Server) postNotice(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	n, err := s.admin.PostNotice(c.UserContext(), req.Text)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"id": n.ID})
}

// intQuery reads an integer query parameter within [min, max].
func intQuery(c *fiber.Ctx, name string, def, min, max int) (int, error) {
	raw := c.Query(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < min || n > max {
		return 0, errf(errcode.BadRequest, "%s must be an integer from %d to %d", name, min, max)
	}
	return n, nil
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
