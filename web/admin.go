package web

import (
	"encoding/json"
	"log/slog"
	"time"

	"github.com/gofiber/fiber/v2"

	auditlog "github.com/chatd/chatd/audit"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime/admin"
	"github.com/chatd/chatd/rooms"
)

// adminAPI serves the operator's reads and actions (Admin): nodes,
// stats, settings, notices, message removal, the matchmaking queues and
// the admin console's own endpoints under /admin.
type adminAPI struct {
	admin *admin.Admin
	node  string // this node's id, for whoami
	ip    proxies
	now   func() time.Time
	log   *slog.Logger
}

// routes: reads take either admin token (or, for stats and settings, a
// user's), actions the full admin token only, each in the audit log.
func (h *adminAPI) routes(api fiber.Router, a *authAPI) {
	read, act, reader := a.requireAdminRead, a.requireAdmin, a.requireReader
	api.Get("/nodes", read, h.listNodes) // internal addresses: not for users
	api.Get("/stats", reader, h.getStats)
	api.Get("/settings", reader, h.getSettings)
	api.Get("/settings/defs", reader, h.getSettingDefs)
	api.Put("/settings/:key", act, h.putSetting)
	api.Delete("/settings/:key", act, h.deleteSetting)
	api.Post("/notices", act, h.postNotice)
	api.Delete("/rooms/:room/messages/:id", act, h.removeMessage)
	api.Get("/matchmaking/queues", read, h.listQueues)

	api.Get("/admin/whoami", read, h.adminWhoami)
	api.Get("/admin/rooms", read, h.adminRooms)
	api.Get("/admin/rooms/:room", read, h.adminRoom)
	api.Post("/admin/rooms/:room/messages", act, h.adminSay)
	api.Post("/admin/disconnect", act, h.adminDisconnect)
	api.Get("/admin/users", read, h.adminUsers)
	api.Get("/admin/audit", read, h.adminAudit)
}

func (h *adminAPI) adminWhoami(c *fiber.Ctx) error {
	role, _ := c.Locals(localRole).(string)
	return c.JSON(fiber.Map{"role": role, "node": h.node})
}

func (h *adminAPI) adminRooms(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", admin.DefaultRoomsLimit, 1, admin.MaxRoomsLimit)
	if err != nil {
		return err
	}
	rs, err := h.admin.RoomsByPopulation(c.UserContext(), limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"rooms": rs})
}

func (h *adminAPI) adminRoom(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", admin.DefaultRoomHistory, 1, rooms.MaxHistoryLimit)
	if err != nil {
		return err
	}
	d, err := h.admin.RoomDetail(c.UserContext(), c.Params("room"), limit)
	if err != nil {
		return err
	}
	members := make([]fiber.Map, 0, len(d.Members))
	for _, st := range d.Members {
		members = append(members, presenceOf(st))
	}
	return c.JSON(fiber.Map{"room": d.Room, "members": members, "messages": d.Messages})
}

func (h *adminAPI) adminSay(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	m, err := h.admin.SystemSay(c.UserContext(), c.Params("room"), req.Text)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"message": m})
}

func (h *adminAPI) adminDisconnect(c *fiber.Ctx) error {
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
	if err := h.admin.Disconnect(c.UserContext(), req.User, req.Node, req.Connection, req.Reason); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *adminAPI) adminUsers(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 20, 1, presence.MaxSearch)
	if err != nil {
		return err
	}
	prefix := c.Query("prefix")
	if prefix == "" {
		return errf(errcode.BadRequest, "send prefix: the start of a user name")
	}
	us, err := h.admin.SearchUsers(c.UserContext(), prefix, limit)
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

func (h *adminAPI) adminAudit(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 100, 1, auditlog.MaxList)
	if err != nil {
		return err
	}
	es, err := h.admin.AuditLog(c.UserContext(), limit)
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

func (h *adminAPI) listNodes(c *fiber.Ctx) error {
	ns, err := h.admin.Nodes(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(ns))
	now := h.now()
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

func (h *adminAPI) getStats(c *fiber.Ctx) error {
	st, err := h.admin.Stats(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(st)
}

func (h *adminAPI) getSettings(c *fiber.Ctx) error {
	v, vals := h.admin.Settings()
	return c.JSON(fiber.Map{"version": v, "values": vals})
}

func (h *adminAPI) getSettingDefs(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"settings": h.admin.SettingDefs()})
}

func (h *adminAPI) putSetting(c *fiber.Ctx) error {
	var req struct {
		Value *json.RawMessage `json:"value"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.Value == nil {
		return errf(errcode.BadRequest, `send {"value": …}`)
	}
	v, err := h.admin.SetSetting(c.UserContext(), c.Params("key"), *req.Value)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"version": v})
}

func (h *adminAPI) deleteSetting(c *fiber.Ctx) error {
	v, err := h.admin.ResetSetting(c.UserContext(), c.Params("key"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"version": v})
}

func (h *adminAPI) postNotice(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	n, err := h.admin.PostNotice(c.UserContext(), req.Text)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"id": n.ID})
}

func (h *adminAPI) removeMessage(c *fiber.Ctx) error {
	room, id := c.Params("room"), c.Params("id")
	if err := h.admin.RemoveMessage(c.UserContext(), room, id); err != nil {
		return err
	}
	h.log.Info("admin removed a message", "room", room, "id", id, "from", h.ip.clientIP(c))
	return c.JSON(fiber.Map{"ok": true})
}

func (h *adminAPI) listQueues(c *fiber.Ctx) error {
	qs, err := h.admin.Queues(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"queues": qs})
}
