package web

import (
	"context"

	"github.com/gofiber/fiber/v2"

	dm "github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/direct"
)

// directAPI serves direct messages and blocks (realtime/direct), over
// HTTP and as the dm_* frames of a WebSocket.
type directAPI struct {
	direct *direct.Direct
}

func (h *directAPI) routes(api fiber.Router, a *authAPI) {
	user := a.requireUser
	api.Get("/direct", user, h.list)
	api.Post("/direct/:with", user, h.open)
	api.Get("/direct/:with/messages", user, h.history)
	api.Post("/direct/:with/messages", user, h.send)
	api.Post("/direct/:with/read", user, h.read)
	api.Post("/direct/:with/typing", user, h.typing)
	api.Get("/blocks", user, h.blocks)
	api.Put("/blocks/:user", user, h.block)
	api.Delete("/blocks/:user", user, h.unblock)
	// an admin reads a conversation with the full admin token only, and
	// the read goes to the audit log like every admin action
	api.Get("/admin/direct/:conversation/messages", a.requireAdmin, h.adminHistory)
	api.Delete("/admin/direct/:conversation/messages/:id", a.requireAdmin, h.adminRemove)
}

func conversationOf(conv dm.Conversation, user string) protocol.Conversation {
	return protocol.Conversation{ID: conv.ID, With: conv.Peer(user)}
}

func (h *directAPI) list(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 20, 1, 50)
	if err != nil {
		return err
	}
	list, err := h.direct.List(c.UserContext(), principal(c), limit)
	if err != nil {
		return err
	}
	if list == nil {
		list = []dm.Summary{}
	}
	return c.JSON(fiber.Map{"conversations": list})
}

func (h *directAPI) open(c *fiber.Ctx) error {
	p := principal(c)
	conv, err := h.direct.Open(c.UserContext(), p, c.Params("with"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"conversation": conversationOf(conv, p.User)})
}

// pageOf is a page of history as the API answers it.
func pageOf(conv any, page dm.Page) fiber.Map {
	msgs := page.Messages
	if msgs == nil {
		msgs = []dm.Message{}
	}
	return fiber.Map{"conversation": conv, "messages": msgs, "gap": page.Gap, "more": page.More}
}

func (h *directAPI) history(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	p := principal(c)
	conv, page, err := h.direct.History(c.UserContext(), p, c.Params("with"), c.Query("after"), limit)
	if err != nil {
		return err
	}
	return c.JSON(pageOf(conversationOf(conv, p.User), page))
}

func (h *directAPI) send(c *fiber.Ctx) error {
	text, key, err := textPost(c)
	if err != nil {
		return err
	}
	sent, err := h.direct.Send(c.UserContext(), principal(c), c.Params("with"), text, key)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"message": sent.Message, "repeated": sent.Repeated})
}

func (h *directAPI) read(c *fiber.Ctx) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.ID == "" {
		return errf(errcode.BadRequest, `send {"id": "<message id>"}`)
	}
	_, n, err := h.direct.Read(c.UserContext(), principal(c), c.Params("with"), req.ID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"unread": n})
}

func (h *directAPI) typing(c *fiber.Ctx) error {
	if err := h.direct.Typing(c.UserContext(), principal(c), c.Params("with")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *directAPI) blocks(c *fiber.Ctx) error {
	bl, err := h.direct.Blocks(c.UserContext(), principal(c))
	if err != nil {
		return err
	}
	if bl == nil {
		bl = []string{}
	}
	return c.JSON(fiber.Map{"blocks": bl})
}

func (h *directAPI) block(c *fiber.Ctx) error {
	if err := h.direct.Block(c.UserContext(), principal(c), c.Params("user")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *directAPI) unblock(c *fiber.Ctx) error {
	if err := h.direct.Unblock(c.UserContext(), principal(c), c.Params("user")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *directAPI) adminHistory(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	conv, page, err := h.direct.AdminHistory(c.UserContext(), c.Params("conversation"), c.Query("after"), limit)
	if err != nil {
		return err
	}
	return c.JSON(pageOf(fiber.Map{"id": conv.ID, "users": []string{conv.A, conv.B}}, page))
}

func (h *directAPI) adminRemove(c *fiber.Ctx) error {
	if err := h.direct.AdminRemove(c.UserContext(), c.Params("conversation"), c.Params("id")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

// frame runs a dm_* frame of a WebSocket: dm_opened, dm_sent and
// dm_resumed answer with the frame's ref; dm_typing and dm_read answer
// nothing (the read mark's dm_read event reaches the user's connections).
func (h *directAPI) frame(ctx context.Context, c *realtime.Client, f protocol.Frame) error {
	p := c.Principal()
	switch f.Type {
	case protocol.TypeDMOpen:
		conv, err := h.direct.Open(ctx, p, f.To)
		if err != nil {
			return err
		}
		c.SendEvent(protocol.DMOpened{Ref: f.Ref, Conversation: conversationOf(conv, p.User)})
	case protocol.TypeDMSend:
		sent, err := h.direct.Send(ctx, p, f.To, f.Text, f.Ref)
		if err != nil {
			return err
		}
		c.SendEvent(protocol.DMSent{Ref: f.Ref, Conversation: sent.Message.Conversation, ID: sent.Message.ID,
			TS: sent.Message.TS, Repeated: sent.Repeated})
	case protocol.TypeDMTyping:
		return h.direct.Typing(ctx, p, f.To)
	case protocol.TypeDMRead:
		_, _, err := h.direct.Read(ctx, p, f.To, f.ID)
		return err
	case protocol.TypeDMResume:
		return h.direct.Resume(ctx, c, f.To, f.After, f.Ref)
	}
	return nil
}
