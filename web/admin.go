package web

import (
	"time"

	"github.com/gofiber/fiber/v2"

	auditlog "github.com/chatd/chatd/audit"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime/admin"
	"github.com/chatd/chatd/rooms"
)

// adminRoutes are the admin console's own endpoints under /admin: reads
// (either admin token) and actions (the full admin token only, each in the
// audit log).
func (s *Server) adminRoutes(api fiber.Router, read, act fiber.Handler) {
	api.Get("/admin/whoami", read, s.adminWhoami)
	api.Get("/admin/rooms", read, s.adminRooms)
	api.Get("/admin/rooms/:room", read, s.adminRoom)
	api.Post("/admin/rooms/:room/messages", act, s.adminSay)
	api.Post("/admin/disconnect", act, s.adminDisconnect)
	api.Get("/admin/users", read, s.adminUsers)
	api.Get("/admin/audit", read, s.adminAudit)
}

func (s *Server) adminWhoami(c *fiber.Ctx) error {
	role, _ := c.Locals(localRole).(string)
	return c.JSON(fiber.Map{"role": role, "node": s.cfg.Node})
}

func (s *Server) adminRooms(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", admin.DefaultRoomsLimit, 1, admin.MaxRoomsLimit)
	if err != nil {
		return err
	}
	rs, err := s.admin.RoomsByPopulation(c.UserContext(), limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"rooms": rs})
}

func (s *Server) adminRoom(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", admin.DefaultRoomHistory, 1, rooms.MaxHistoryLimit)
	if err != nil {
		return err
	}
	d, err := s.admin.RoomDetail(c.UserContext(), c.Params("room"), limit)
	if err != nil {
		return err
	}
	members := make([]fiber.Map, 0, len(d.Members))
	for _, st := range d.Members {
		members = append(members, presenceOf(st))
	}
	return c.JSON(fiber.Map{"room": d.Room, "members": members, "messages": d.Messages})
}

func (s *Server) adminSay(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	m, err := s.admin.SystemSay(c.UserContext(), c.Params("room"), req.Text)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"message": m})
}

func (s *Server) adminDisconnect(c *fiber.Ctx) error {
	var req struct {
		User       string `json:"user"`
		Node       string `json:"node"`
		Connection string `json:"connection"`
		Reason     string `json:"reason"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.Connection != "" && req.Node == "" {
		return errf(errcode.BadRequest, "a connection is named with its node: send node too")
	}
	if len(req.Reason) > 500 {
		return errf(errcode.BadRequest, "reason is longer than 500 bytes")
	}
	if err := s.admin.Disconnect(c.UserContext(), req.User, req.Node, req.Connection, req.Reason); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) adminUsers(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 20, 1, presence.MaxSearch)
	if err != nil {
		return err
	}
	prefix := c.Query("prefix")
	if prefix == "" {
		return errf(errcode.BadRequest, "send prefix: the start of a user name")
	}
	us, err := s.admin.SearchUsers(c.UserContext(), prefix, limit)
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(us))
	for _, u := range us {
		m := presenceOf(u.Status)
		conns := make([]fiber.Map, 0, len(u.Connections))
		for _, cn := range u.Connections {
			conns = append(conns, fiber.Map{"id": cn.ID, "node": cn.Node, "session": cn.Session})
		}
		m["connections"], m["sessions"] = conns, u.Sessions
		out = append(out, m)
	}
	return c.JSON(fiber.Map{"users": out})
}

func (s *Server) adminAudit(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 100, 1, auditlog.MaxList)
	if err != nil {
		return err
	}
	es, err := s.admin.AuditLog(c.UserContext(), limit)
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(es))
	for _, e := range es {
		out = append(out, fiber.Map{"at": e.At.UTC().Format(time.RFC3339Nano), "actor": e.Actor, "role": e.Role,
			"action": e.Action, "target": e.Target, "detail": e.Detail, "status": e.Status, "node": e.Node})
	}
	return c.JSON(fiber.Map{"entries": out})
}

// presenceOf is a user's presence as GET /presence/{user} shows it.
func presenceOf(st presence.Status) fiber.Map {
	if st.Rooms == nil {
		st.Rooms = []string{}
	}
	out := fiber.Map{"user": st.User, "online": st.Online, "node": st.Node, "rooms": st.Rooms, "last_seen": nil}
	if !st.LastSeen.IsZero() {
		out["last_seen"] = st.LastSeen.UTC().Format(time.RFC3339)
	}
	return out
}
