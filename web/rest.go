package web

import (
	"encoding/json"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/chat"
	"github.com/chatd/chatd/rooms"
)

// chatAPI serves the chat over HTTP (Chat): lobbies, rooms, messages and
// their history, presence, unread counts, read marks and typing.
type chatAPI struct {
	chat  *chat.Chat // CanSee
	rest  *chat.REST
	reads *chat.Reads
	// histories bounds the history pages being built at once on this
	// node (Config.MaxHistoryBuilds): each holds up to 1,000 messages read from
	// Redis while it is cut to its byte budget
	histories chan struct{}
}

func (h *chatAPI) routes(api fiber.Router, a *authAPI) {
	user, reader := a.requireUser, a.requireReader
	api.Post("/lobbies/:lobby/join", user, h.joinLobby)
	api.Get("/lobbies/:lobby/rooms", reader, h.listRooms)
	api.Get("/rooms/:room", reader, h.getRoom)
	api.Post("/rooms/:room/leave", user, h.leaveRoom)
	api.Post("/rooms/:room/messages", user, h.postMessage)
	api.Get("/rooms/:room/messages", reader, h.listMessages)
	api.Get("/presence/:user", reader, h.getPresence)

	api.Get("/lobbies", reader, h.listLobbies)
	api.Get("/unread", user, h.unread)
	api.Post("/rooms/:room/read", user, h.markRead)
	api.Post("/rooms/:room/typing", user, h.postTyping)
	api.Post("/rooms/:room/join", user, h.joinRoom)
}

func (h *chatAPI) joinLobby(c *fiber.Ctx) error {
	room, err := h.rest.JoinREST(c.UserContext(), principal(c), c.Params("lobby"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": room})
}

func (h *chatAPI) leaveRoom(c *fiber.Ctx) error {
	if err := h.rest.LeaveREST(c.UserContext(), principal(c), c.Params("room")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *chatAPI) listRooms(c *fiber.Ctx) error {
	rs, err := h.reads.Rooms(c.UserContext(), viewer(c), c.Params("lobby"))
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []rooms.Room{}
	}
	return c.JSON(fiber.Map{"rooms": rs})
}

func (h *chatAPI) getRoom(c *fiber.Ctx) error {
	if err := h.chat.CanSee(c.UserContext(), viewer(c), c.Params("room")); err != nil {
		return err
	}
	r, err := h.reads.Room(c.UserContext(), c.Params("room"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": r})
}

// postMessage sends a message; an Idempotency-Key makes a retry of the
// same post answer the first message and send nothing.
func (h *chatAPI) postMessage(c *fiber.Ctx) error {
	text, key, err := textPost(c)
	if err != nil {
		return err
	}
	msg, err := h.rest.Post(c.UserContext(), principal(c), c.Params("room"), text, key)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"message": msg})
}

// textPost reads a post of a text: the JSON body's "text" and the
// Idempotency-Key header (see idempotencyKey).
func textPost(c *fiber.Ctx) (text, key string, err error) {
	var req struct {
		Text string `json:"text"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return "", "", err
	}
	key, err = idempotencyKey(c)
	return req.Text, key, err
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

func (h *chatAPI) listMessages(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", rooms.DefaultHistoryLimit, 1, rooms.MaxHistoryLimit)
	if err != nil {
		return err
	}
	if err := h.chat.CanSee(c.UserContext(), viewer(c), c.Params("room")); err != nil {
		return err
	}
	// a page is read and built while holding one of Config.MaxHistoryBuilds
	// slots: what a node holds for histories at once is bounded whatever
	// the number of readers (40 slow readers of 1,000 messages of 12 KB
	// each took a node from 27 to 1,207 MiB)
	select {
	case h.histories <- struct{}{}:
	case <-c.UserContext().Done():
		return c.UserContext().Err()
	}
	defer func() { <-h.histories }()
	msgs, err := h.reads.History(c.UserContext(), viewer(c), c.Params("room"), c.Query("after"), limit)
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

func (h *chatAPI) getPresence(c *fiber.Ctx) error {
	st, err := h.reads.Presence(c.UserContext(), viewer(c), c.Params("user"))
	if err != nil {
		return err
	}
	return c.JSON(presenceOf(st))
}

func (h *chatAPI) listLobbies(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", rooms.DefaultLobbiesLimit, 1, rooms.MaxLobbiesLimit)
	if err != nil {
		return err
	}
	ls, err := h.reads.Lobbies(c.UserContext(), limit)
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(ls))
	for _, l := range ls {
		out = append(out, fiber.Map{"lobby": l.Lobby, "online": l.Online, "rooms": l.Rooms})
	}
	return c.JSON(fiber.Map{"lobbies": out})
}

func (h *chatAPI) unread(c *fiber.Ctx) error {
	counts, err := h.reads.Unread(c.UserContext(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"rooms": counts})
}

// postTyping relays a typing indicator of a REST or event-stream session
// (the WebSocket sends a typing frame instead); at most one per user and
// room every chat.TypingEvery is relayed, the rest answer ok silently.
func (h *chatAPI) postTyping(c *fiber.Ctx) error {
	if err := h.rest.TypingREST(c.UserContext(), principal(c), c.Params("room")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *chatAPI) markRead(c *fiber.Ctx) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.ID == "" {
		return errf(errcode.BadRequest, `send {"id": "<message id>"}: the last message read`)
	}
	if err := h.chat.Read(c.UserContext(), principal(c), c.Params("room"), req.ID); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

// joinRoom takes a REST session into a room by its id: a match's room, or
// back into a room whose seat lapsed.
func (h *chatAPI) joinRoom(c *fiber.Ctx) error {
	room, err := h.rest.JoinRoomREST(c.UserContext(), principal(c), c.Params("room"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": room})
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
