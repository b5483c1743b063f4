package web

import (
	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/realtime/serverapi"
)

// serverAPI serves the server API for backends (serverapi.ServerAPI):
// the routes under /server, each admitted by an API key of its scope
// (authAPI.requireServer), rate limited per key and in the audit log.
type serverAPI struct {
	api *serverapi.ServerAPI
}

func (h *serverAPI) routes(api fiber.Router, a *authAPI) {
	key := func(scope string) fiber.Handler { return a.requireServer(scope, h.allow) }
	api.Post("/server/rooms/:room/messages", key(ScopePublish), h.publish)
	api.Post("/server/lobbies/:lobby/messages", key(ScopeBroadcast), h.broadcast)
	api.Get("/server/presence/:user", key(ScopePresence), h.presence)
	api.Post("/server/users/:user/disconnect", key(ScopeDisconnect), h.disconnect)
	api.Put("/server/rooms/:room/access/:user", key(ScopeGrant), h.grant)
	api.Delete("/server/rooms/:room/access/:user", key(ScopeGrant), h.revoke)
}

func (h *serverAPI) allow(c *fiber.Ctx, name string, perSecond float64) error {
	return h.api.Allow(c.UserContext(), name, perSecond)
}

func (h *serverAPI) publish(c *fiber.Ctx) error {
	var req struct {
		Text string `json:"text"`
		User string `json:"user"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	m, err := h.api.Publish(c.UserContext(), serverKeyOf(c).Name, c.Params("room"), req.User, req.Text, key)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"message": m})
}

func (h *serverAPI) broadcast(c *fiber.Ctx) error {
	text, key, err := textPost(c)
	if err != nil {
		return err
	}
	ms, err := h.api.Broadcast(c.UserContext(), serverKeyOf(c).Name, c.Params("lobby"), text, key)
	if err != nil {
		return err
	}
	out := make([]fiber.Map, 0, len(ms))
	for _, m := range ms { // the text is the request's: each room's message by its id
		out = append(out, fiber.Map{"room": m.Room, "id": m.ID})
	}
	return c.JSON(fiber.Map{"messages": out})
}

func (h *serverAPI) presence(c *fiber.Ctx) error {
	st, err := h.api.Presence(c.UserContext(), c.Params("user"))
	if err != nil {
		return err
	}
	return c.JSON(presenceOf(st))
}

func (h *serverAPI) disconnect(c *fiber.Ctx) error {
	var req struct {
		Reason string `json:"reason"`
	}
	if len(c.Body()) > 0 {
		if err := decodeJSON(c.Body(), &req); err != nil {
			return err
		}
	}
	if err := h.api.Disconnect(c.UserContext(), c.Params("user"), req.Reason); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *serverAPI) grant(c *fiber.Ctx) error {
	changed, err := h.api.Grant(c.UserContext(), c.Params("room"), c.Params("user"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": c.Params("room"), "user": c.Params("user"), "access": true, "changed": changed})
}

func (h *serverAPI) revoke(c *fiber.Ctx) error {
	changed, err := h.api.Revoke(c.UserContext(), c.Params("room"), c.Params("user"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"room": c.Params("room"), "user": c.Params("user"), "access": false, "changed": changed})
}
