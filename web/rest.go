package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/ratelimit"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/seen"
	"github.com/chatd/chatd/settings"
	"github.com/chatd/chatd/shop"
)

func init() {
	errorTable = append(errorTable,
		mapping{rooms.ErrUnknownRoom, http.StatusNotFound, "unknown_room"},
		mapping{rooms.ErrNotSeated, http.StatusForbidden, "not_seated"},
		mapping{rooms.ErrRoomFull, http.StatusConflict, "room_full"},
		mapping{rooms.ErrSeatedElsewhere, http.StatusConflict, "seated_elsewhere"},
		mapping{rooms.ErrBusy, http.StatusServiceUnavailable, "busy"},
		mapping{rooms.ErrResumeGap, http.StatusConflict, "resume_gap"},
		mapping{rooms.ErrBadID, http.StatusBadRequest, "bad_request"},
		mapping{rooms.ErrBadText, http.StatusBadRequest, "bad_request"},
		mapping{lock.ErrNotObtained, http.StatusServiceUnavailable, "busy"},
		mapping{settings.ErrUnknownSetting, http.StatusBadRequest, "unknown_setting"},
		mapping{settings.ErrBadValue, http.StatusBadRequest, "bad_value"},
		mapping{ranking.ErrBadScore, http.StatusBadRequest, "bad_value"},
		mapping{ranking.ErrBadMode, http.StatusBadRequest, "bad_value"},
		mapping{ranking.ErrBadLimit, http.StatusBadRequest, "bad_request"},
		mapping{ranking.ErrBadRadius, http.StatusBadRequest, "bad_request"},
		mapping{ranking.ErrBatchTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
		mapping{ranking.ErrUnknownPlayer, http.StatusNotFound, "unknown_player"},
		mapping{seen.ErrTooManyItems, http.StatusRequestEntityTooLarge, "too_large"},
		mapping{seen.ErrBadItem, http.StatusBadRequest, "bad_value"},
		mapping{shop.ErrUnknownItem, http.StatusNotFound, "unknown_item"},
		mapping{shop.ErrSoldOut, http.StatusConflict, "sold_out"},
		mapping{shop.ErrInsufficientFunds, http.StatusConflict, "insufficient_funds"},
		mapping{shop.ErrConflict, http.StatusConflict, "conflict"},
		mapping{shop.ErrBadValue, http.StatusBadRequest, "bad_value"},
		mapping{shop.ErrBalanceOverflow, http.StatusBadRequest, "bad_value"},
		mapping{shop.ErrBadIdempotencyKey, http.StatusBadRequest, "bad_request"},
		mapping{shop.ErrIdempotencyMismatch, http.StatusBadRequest, "bad_request"},
		mapping{notices.ErrBadText, http.StatusBadRequest, "bad_value"},
		mapping{ratelimit.ErrLimited, http.StatusTooManyRequests, "rate_limited"},
		mapping{dirty.ErrBadID, http.StatusBadRequest, "bad_request"},
	)
}

func (s *Server) apiRoutes(api fiber.Router) {
	user, admin := s.requireUser, s.requireAdmin

	api.Post("/lobbies/:lobby/join", user, s.joinLobby)
	api.Get("/lobbies/:lobby/rooms", user, s.listRooms)
	api.Get("/rooms/:room", user, s.getRoom)
	api.Post("/rooms/:room/leave", user, s.leaveRoom)
	api.Post("/rooms/:room/messages", user, s.postMessage)
	api.Get("/rooms/:room/messages", user, s.listMessages)

	api.Get("/presence/:user", user, s.getPresence)
	api.Get("/nodes", user, s.listNodes)
	api.Get("/stats", user, s.getStats)

	api.Get("/settings", user, s.getSettings)
	api.Get("/settings/defs", user, s.getSettingDefs)
	api.Put("/settings/:key", admin, s.putSetting)
	api.Delete("/settings/:key", admin, s.deleteSetting)
	api.Post("/notices", admin, s.postNotice)

	s.gameRoutes(api, user, admin)
	api.Get("/poll", user, s.poll)
}

func (s *Server) joinLobby(c *fiber.Ctx) error {
	sess := sessionOf(c)
	room, err := s.rooms.Join(c.UserContext(), c.Params("lobby"), sess.User)
	if err != nil {
		return err
	}
	s.restEnter(c.UserContext(), sess, room.ID)
	s.goRun(func() { s.markRoom(room.ID, dirty.Of(dirty.Rooms)) })
	return c.JSON(fiber.Map{"room": room})
}

func (s *Server) leaveRoom(c *fiber.Ctx) error {
	sess := sessionOf(c)
	room := c.Params("room")
	if err := names.Room(room); err != nil {
		return err
	}
	err := s.rooms.Leave(c.UserContext(), room, sess.User)
	if err != nil && !errors.Is(err, rooms.ErrNotSeated) {
		return err
	}
	if err := s.dirty.DropCursor(c.UserContext(), sess.ID, room); err != nil {
		s.log.Debug("drop cursor", "err", err)
	}
	s.goRun(func() { s.markRoom(room, dirty.Of(dirty.Rooms)) })
	return c.JSON(fiber.Map{"ok": true})
}

func (s *Server) listRooms(c *fiber.Ctx) error {
	rs, err := s.rooms.Rooms(c.UserContext(), c.Params("lobby"))
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []rooms.Room{}
	}
	return c.JSON(fiber.Map{"rooms": rs})
}

func (s *Server) getRoom(c *fiber.Ctx) error {
	r, err := s.rooms.Room(c.UserContext(), c.Params("room"))
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
	msg, err := s.say(c.UserContext(), sessionOf(c).User, c.Params("room"), req.Text)
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
	msgs, err := s.rooms.History(c.UserContext(), c.Params("room"), c.Query("after"), limit)
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
	st, err := s.presence.Get(c.UserContext(), user)
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
	ns, err := s.presence.Nodes(c.UserContext())
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
	msgs, roomsTotal, err := s.rooms.Counters(ctx)
	if err != nil {
		return err
	}
	online, err := s.presence.Online(ctx)
	if err != nil {
		return err
	}
	ns, err := s.presence.Nodes(ctx)
	if err != nil {
		return err
	}
	purchases, err := s.shop.Purchases(ctx)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"messages_total": msgs, "rooms_total": roomsTotal, "online": online, "nodes": len(ns), "purchases_total": purchases})
}

func (s *Server) getSettings(c *fiber.Ctx) error {
	v, vals := s.settings.Values()
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
	v, err := s.settings.Set(c.UserContext(), c.Params("key"), *req.Value)
	if err != nil {
		return err
	}
	s.goRun(func() { s.markAll(dirty.Of(dirty.Settings)) })
	return c.JSON(fiber.Map{"version": v})
}

func (s *Server) deleteSetting(c *fiber.Ctx) error {
	v, err := s.settings.Reset(c.UserContext(), c.Params("key"))
	if err != nil {
		return err
	}
	s.goRun(func() { s.markAll(dirty.Of(dirty.Settings)) })
	return c.JSON(fiber.Map{"version": v})
}

func (s *Server) postNotice(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	n, err := s.notices.Post(c.UserContext(), req.Text)
	if err != nil {
		return err
	}
	s.goRun(func() { s.markAll(dirty.Of(dirty.Notices)) })
	return c.JSON(fiber.Map{"id": n.ID})
}

// markAll marks every live REST session; the node that took the write
// does it, once.
func (s *Server) markAll(bits dirty.Mask) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.dirty.MarkAll(ctx, bits); err != nil {
		s.log.Warn("mark all sessions dirty", "err", err)
	}
}

// onNotice delivers a new notice to this node's WebSocket clients and
// marks it seen for them.
func (s *Server) onNotice(_ string, p []byte) {
	ev, err := notices.DecodeEvent(p)
	if err != nil {
		return
	}
	frame := mustJSON(map[string]string{"type": "notice", "id": ev.ID, "text": ev.Text})
	cs := s.conns.all()
	users := map[string]struct{}{}
	for _, c := range cs {
		c.enqueue(frame)
		users[c.user] = struct{}{}
	}
	s.goRun(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for u := range users {
			if err := s.seen.Mark(ctx, u, []string{ev.ID}); err != nil {
				s.log.Debug("mark notice seen", "user", u, "err", err)
			}
		}
	})
}

// deliverUnseenNotices sends a new connection the recent notices its user
// has not seen (by the user's seen filter), then marks them seen.
func (s *Server) deliverUnseenNotices(c *client) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ids, byID, err := s.unseenNotices(ctx, c.user)
	if err != nil || len(ids) == 0 {
		return
	}
	// Mark first, then send: a notice is shown once (at most), even when the
	// user's next connection opens before this one has finished.
	if err := s.seen.Mark(ctx, c.user, ids); err != nil {
		s.log.Debug("mark notices seen", "user", c.user, "err", err)
		return
	}
	for _, id := range ids {
		c.sendJSON(map[string]string{"type": "notice", "id": id, "text": byID[id].Text})
	}
}

// unseenNotices returns the ids of the recent notices user has not seen,
// oldest first.
func (s *Server) unseenNotices(ctx context.Context, user string) ([]string, map[string]notices.Notice, error) {
	recent, err := s.notices.Recent(ctx, 0)
	if err != nil || len(recent) == 0 {
		return nil, nil, err
	}
	ids := make([]string, len(recent))
	byID := make(map[string]notices.Notice, len(recent))
	for i, n := range recent {
		ids[i] = n.ID
		byID[n.ID] = n
	}
	unseen, err := s.seen.Unseen(ctx, user, ids)
	return unseen, byID, err
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

func mustJSON(v any) []byte {
	p, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return p
}
