package web

import (
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/realtime/game"
	"github.com/chatd/chatd/shop"
)

// gameAPI serves leaderboards, seen-item filters, the shop and wallets
// (Game).
type gameAPI struct {
	game *game.Game
}

func (h *gameAPI) routes(api fiber.Router, a *authAPI) {
	user, admin, reader := a.requireUser, a.requireAdmin, a.requireReader
	api.Get("/leaderboards/:board/top", reader, h.boardTop)
	api.Post("/leaderboards/:board/scores", user, h.postScore)
	api.Get("/leaderboards/:board/players/:player", reader, h.boardPlayer)
	api.Get("/leaderboards/:board/around/:player", reader, h.boardAround)
	api.Get("/leaderboards/:board/range", reader, h.boardRange)
	api.Post("/leaderboards/:board/ranks", reader, h.boardRanks)

	api.Post("/seen", user, h.markSeen)
	api.Post("/seen/filter", user, h.filterSeen)

	api.Get("/shop/items", reader, h.shopItems)
	api.Post("/shop/items", admin, h.stockItem)
	api.Post("/wallet/grant", admin, h.grant)
	api.Get("/wallet", user, h.wallet)
	api.Post("/shop/buy", user, h.buy)
}

func entries(es []ranking.Entry) []ranking.Entry {
	if es == nil {
		return []ranking.Entry{}
	}
	return es
}

func (h *gameAPI) boardTop(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", ranking.DefaultLimit, 1, ranking.MaxLimit)
	if err != nil {
		return err
	}
	es, err := h.game.Top(c.UserContext(), c.Params("board"), limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"entries": entries(es)})
}

func (h *gameAPI) postScore(c *fiber.Ctx) error {
	var req struct {
		Player string          `json:"player"`
		Score  json.RawMessage `json:"score"`
		Mode   string          `json:"mode"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if len(req.Score) == 0 {
		return errf(errcode.BadRequest, `send {"player": "p", "score": 12.5}`)
	}
	if req.Score[0] == '"' {
		return errf(errcode.BadValue, "score must be a JSON number such as 12.5, not a string; got %s", clipText(string(req.Score), 40))
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	e, err := h.game.PostScore(c.UserContext(), principal(c), c.Params("board"), req.Player, string(req.Score), req.Mode, key)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"entry": e})
}

func (h *gameAPI) boardPlayer(c *fiber.Ctx) error {
	e, err := h.game.Player(c.UserContext(), c.Params("board"), c.Params("player"))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"entry": e})
}

func (h *gameAPI) boardAround(c *fiber.Ctx) error {
	radius, err := intQuery(c, "radius", ranking.DefaultRadius, 0, ranking.MaxRadius)
	if err != nil {
		return err
	}
	es, err := h.game.Around(c.UserContext(), c.Params("board"), c.Params("player"), radius)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"entries": entries(es)})
}

func (h *gameAPI) boardRange(c *fiber.Ctx) error {
	limit, err := intQuery(c, "limit", ranking.DefaultLimit, 1, ranking.MaxLimit)
	if err != nil {
		return err
	}
	es, err := h.game.Range(c.UserContext(), c.Params("board"), c.Query("min"), c.Query("max"), limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"entries": entries(es)})
}

func (h *gameAPI) boardRanks(c *fiber.Ctx) error {
	var req struct {
		Players []string `json:"players"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	es, err := h.game.Ranks(c.UserContext(), c.Params("board"), req.Players)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"entries": entries(es)})
}

type itemsReq struct {
	Items []string `json:"items"`
}

func (h *gameAPI) markSeen(c *fiber.Ctx) error {
	var req itemsReq
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if err := h.game.MarkSeen(c.UserContext(), principal(c), req.Items); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *gameAPI) filterSeen(c *fiber.Ctx) error {
	var req itemsReq
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	unseen, err := h.game.Unseen(c.UserContext(), principal(c), req.Items)
	if err != nil {
		return err
	}
	if unseen == nil {
		unseen = []string{}
	}
	return c.JSON(fiber.Map{"unseen": unseen})
}

func (h *gameAPI) shopItems(c *fiber.Ctx) error {
	items, err := h.game.Items(c.UserContext())
	if err != nil {
		return err
	}
	if items == nil {
		items = []shop.Item{}
	}
	return c.JSON(fiber.Map{"items": items})
}

func (h *gameAPI) stockItem(c *fiber.Ctx) error {
	var req struct {
		Item  string `json:"item"`
		Stock *int64 `json:"stock"`
		Price *int64 `json:"price"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.Stock == nil || req.Price == nil {
		return errf(errcode.BadRequest, `send {"item": "sword", "stock": 10, "price": 100}`)
	}
	if err := h.game.Stock(c.UserContext(), req.Item, *req.Stock, *req.Price); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

func (h *gameAPI) grant(c *fiber.Ctx) error {
	var req struct {
		User   string `json:"user"`
		Amount *int64 `json:"amount"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	if req.Amount == nil {
		return errf(errcode.BadRequest, `send {"user": "alice", "amount": 500}`)
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	bal, err := h.game.Grant(c.UserContext(), req.User, *req.Amount, key)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"balance": bal})
}

func (h *gameAPI) wallet(c *fiber.Ctx) error {
	w, err := h.game.Wallet(c.UserContext(), principal(c))
	if err != nil {
		return err
	}
	return c.JSON(w)
}

func (h *gameAPI) buy(c *fiber.Ctx) error {
	var req struct {
		Item string `json:"item"`
		Qty  *int64 `json:"qty"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	qty := int64(1)
	if req.Qty != nil {
		qty = *req.Qty
	}
	key, err := idempotencyKey(c)
	if err != nil {
		return err
	}
	w, err := h.game.Buy(c.UserContext(), principal(c), req.Item, qty, key)
	if err != nil {
		return err
	}
	return c.JSON(w)
}
