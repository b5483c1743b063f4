package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
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
	api.Get("/nodes", admin, s.listNodes) // internal addresses: not for users
	api.Get("/stats", reader, s.getStats)

	api.Get("/settings", reader, s.getSettings)
	api.Get("/settings/defs", reader, s.getSettingDefs)
	api.Put("/settings/:key", admin, s.putSetting)
	api.Delete("/settings/:key", admin, s.deleteSetting)
	api.Post("/notices", admin, s.postNotice)

	s.gameRoutes(api, user, admin)
	s.chatRoutes(api, user, admin)
	api.Get("/poll", user, s.poll)
}

func (s *Server) joinLobby(c *fiber.Ctx) error {
	sess := sessionOf(c)
	room, err := s.node.JoinREST(c.UserContext(), sess.User, sess.ID, c.Params("lobby"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": room})
}

func (s *Server) leaveRoom(c *fiber.Ctx) error {
	sess := sessionOf(c)
	if err := s.node.LeaveREST(c.UserContext(), sess.User, sess.ID, c.Params("room")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) listRooms(c *fiber.Ctx) error {
	rs, err := s.node.Rooms().Rooms(c.UserContext(), c.Params("lobby"))
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []rooms.Room{}
	}
	return c.JSON(fiber.Map{"rooms": rs})
}

func (s *Server) getRoom(c *fiber.Ctx) error {
	r, err := s.node.Rooms().Room(c.UserContext(), c.Params("room"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": r})
}

func (s *Server) postMessage(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	msg, err := s.node.Say(c.UserContext(), sessionOf(c).User, c.Params("room"), req.Text)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"message": msg})
}

func (s *Server) listMessages(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", rooms.DefaultHistoryLimit, 1, rooms.MaxHistoryLimit)
	if err != nil {
		return err
	}
	msgs, err := s.node.Rooms().History(c.UserContext(), c.Params("room"), c.Query("after"), limit)
	if err != nil {
		return err
	}
	if msgs == nil {
		msgs = []rooms.Message{}
	}
	return c.JSON(fiber.Map{"messages": msgs})
}

func (s *Server) getPresence(c *fiber.Ctx) error {
	user := c.Params("user")
	if err := names.User(user); err != nil {
		return err
	}
	st, err := s.node.Presence().Get(c.UserContext(), user)
	if err != nil {
		return err
	}
	if st.Rooms == nil {
		st.Rooms = []string{}
	}
	out := fiber.Map{"user": st.User, "online": st.Online, "node": st.Node, "rooms": st.Rooms, "last_seen": nil}
	if !st.LastSeen.IsZero() {
		out["last_seen"] = st.LastSeen.UTC().Format(time.RFC3339)
	}
	return c.JSON(out)
}

func (s *Server) listNodes(c *fiber.Ctx) error {
	ns, err := s.node.Presence().Nodes(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(ns))
	for _, n := range ns {
		out = append(out, fiber.Map{"id": n.ID, "addr": n.Addr, "connections": n.Connections, "last_heartbeat": n.LastHeartbeat.UTC().Format(time.RFC3339)})
	}
	return c.JSON(fiber.Map{"nodes": out})
}

func (s *Server) getStats(c *fiber.Ctx) error {
	ctx := c.UserContext()
	msgs, roomsTotal, err := s.node.Rooms().Counters(ctx)
	if err != nil {
		return err
	}
	online, err := s.node.Presence().Online(ctx)
	if err != nil {
		return err
	}
	ns, err := s.node.Presence().Nodes(ctx)
	if err != nil {
		return err
	}
	purchases, err := s.node.Shop().Purchases(ctx)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"messages_total": msgs, "rooms_total": roomsTotal, "online": online, "nodes": len(ns), "purchases_total": purchases})
}

func (s *Server) getSettings(c *fiber.Ctx) error {
	v, vals := s.node.Settings().Values()
	return c.JSON(fiber.Map{"version": v, "values": vals})
}

func (s *Server) getSettingDefs(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"settings": settings.Defs()})
}

func (s *Server) putSetting(c *fiber.Ctx) error {
	var req struct {
		Value *json.RawMessage `json:"value"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.Value == nil {
		return errf(http.StatusBadRequest, "bad_request", `send {"value": …}`)
	}
	v, err := s.node.Settings().Set(c.UserContext(), c.Params("key"), *req.Value)
	if err != nil {
		return err
	}
	s.node.MarkAll(dirty.Of(dirty.Settings))
	return c.JSON(fiber.Map{"version": v})
}

func (s *Server) deleteSetting(c *fiber.Ctx) error {
	v, err := s.node.Settings().Reset(c.UserContext(), c.Params("key"))
	if err != nil {
		return err
	}
	s.node.MarkAll(dirty.Of(dirty.Settings))
	return c.JSON(fiber.Map{"version": v})
}

func (s *Server) postNotice(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	n, err := s.node.Notices().Post(c.UserContext(), req.Text)
	if err != nil {
		return err
	}
	s.node.MarkAll(dirty.Of(dirty.Notices))
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
		return 0, errf(http.StatusBadRequest, "bad_request", "%s must be an integer from %d to %d", name, min, max)
	}
	return n, nil
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
