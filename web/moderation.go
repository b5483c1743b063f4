package web

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/moderation"
	moderate "github.com/chatd/chatd/realtime/moderation"
)

// moderationAPI serves kicks, mutes and bans (Moderation).
type moderationAPI struct {
	mod *moderate.Moderation
}

func (h *moderationAPI) routes(api fiber.Router, a *authAPI) {
	act := a.requireAdmin
	api.Get("/moderation", a.requireAdminRead, h.listModeration)
	api.Post("/moderation/kick", act, h.kick)
	api.Post("/moderation/mute", act, h.mute)
	api.Post("/moderation/ban", act, h.ban)
	api.Delete("/moderation/mute/:user", act, h.unmute)
	api.Delete("/moderation/ban/:user", act, h.unban)
}

func (h *moderationAPI) listModeration(c *fiber.Ctx) error {
	mutes, bans, err := h.mod.List(c.UserContext())
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

func (h *moderationAPI) decodeMod(c *fiber.Ctx, needSeconds bool) (modReq, time.Duration, error) {
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

func (h *moderationAPI) kick(c *fiber.Ctx) error {
	req, _, err := h.decodeMod(c, false)
	if err != nil {
		return err
	}
	if err := h.mod.Kick(c.UserContext(), req.User, req.Reason); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *moderationAPI) mute(c *fiber.Ctx) error {
	req, d, err := h.decodeMod(c, true)
	if err != nil {
		return err
	}
	until, err := h.mod.Mute(c.UserContext(), req.User, d, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"until": until.UTC().Format(time.RFC3339)})
}

func (h *moderationAPI) ban(c *fiber.Ctx) error {
	req, d, err := h.decodeMod(c, true)
	if err != nil {
		return err
	}
	until, err := h.mod.Ban(c.UserContext(), req.User, d, req.Reason)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"until": until.UTC().Format(time.RFC3339)})
}

func (h *moderationAPI) unmute(c *fiber.Ctx) error {
	if err := h.mod.Unmute(c.UserContext(), c.Params("user")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *moderationAPI) unban(c *fiber.Ctx) error {
	if err := h.mod.Unban(c.UserContext(), c.Params("user")); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}
