package client

import (
	"context"
	"net/http"
	"time"
)

// Admin endpoints: call them on a Client holding the admin token
// (c.WithToken(adminToken)). A user token there is ErrForbidden; a server
// started without --admin-token answers ErrForbidden to every one.

// Kick closes user's WebSockets on every node with 4001 (reason, clipped
// to 120 bytes, as the close text). Nothing is stored: the user may
// reconnect at once.
func (c *Client) Kick(ctx context.Context, user, reason string) error {
	return c.do(ctx, call{method: http.MethodPost, path: path("moderation", "kick"), body: sanction(user, 0, reason), safe: true})
}

// Ban closes user's WebSockets with 4003 and refuses the user everywhere
// (ErrBanned) for d, rounded up to whole seconds (1 s to 365 days). It
// returns when the ban ends.
func (c *Client) Ban(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error) {
	return c.until(ctx, path("moderation", "ban"), sanction(user, d, reason))
}

// Mute refuses user's says and message posts (ErrMuted) for d, rounded up
// to whole seconds. It returns when the mute ends.
func (c *Client) Mute(ctx context.Context, user string, d time.Duration, reason string) (time.Time, error) {
	return c.until(ctx, path("moderation", "mute"), sanction(user, d, reason))
}

// Unban lifts user's ban at once (fine when there is none).
func (c *Client) Unban(ctx context.Context, user string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: path("moderation", "ban", user), safe: true})
}

// Unmute lifts user's mute at once (fine when there is none).
func (c *Client) Unmute(ctx context.Context, user string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: path("moderation", "mute", user), safe: true})
}

// Moderation lists the active mutes and bans.
func (c *Client) Moderation(ctx context.Context) (Sanctions, error) {
	var out Sanctions
	err := c.do(ctx, call{method: http.MethodGet, path: path("moderation"), out: &out, safe: true})
	return out, err
}

func (c *Client) until(ctx context.Context, p string, body map[string]any) (time.Time, error) {
	var out struct {
		Until time.Time `json:"until"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: p, body: body, out: &out, safe: true})
	return out.Until, err
}

func sanction(user string, d time.Duration, reason string) map[string]any {
	b := map[string]any{"user": user}
	if d > 0 {
		b["seconds"] = int64((d + time.Second - 1) / time.Second)
	}
	if reason != "" {
		b["reason"] = reason
	}
	return b
}

// SetSetting sets a live setting on every node and returns the new
// settings version: ErrUnknownSetting, ErrBadValue.
func (c *Client) SetSetting(ctx context.Context, key string, value any) (int64, error) {
	var out struct {
		Version int64 `json:"version"`
	}
	err := c.do(ctx, call{method: http.MethodPut, path: path("settings", key), body: map[string]any{"value": value}, out: &out, safe: true})
	return out.Version, err
}

// ResetSetting puts a live setting back to its default.
func (c *Client) ResetSetting(ctx context.Context, key string) (int64, error) {
	var out struct {
		Version int64 `json:"version"`
	}
	err := c.do(ctx, call{method: http.MethodDelete, path: path("settings", key), out: &out, safe: true})
	return out.Version, err
}

// PostNotice sends a notice to every user (connected now, or when they
// connect or poll later) and returns its id. It is not retried: a retry
// would post it twice.
func (c *Client) PostNotice(ctx context.Context, text string) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("notices"), body: map[string]string{"text": text}, out: &out})
	return out.ID, err
}

// StockItem sets (not adds) an item's stock and price, creating it.
func (c *Client) StockItem(ctx context.Context, it Item) error {
	return c.do(ctx, call{method: http.MethodPost, path: path("shop", "items"), body: it, safe: true})
}

// Grant adds amount to user's balance and returns the new balance.
//
// Without an option it is not retried: a retry would grant twice. With
// WithIdempotencyKey (an id the application keeps, such as the order the
// coins pay for) it sends the key and is retried like Buy: the server
// grants once per key and user and answers a repeat the first grant's
// balance, so the same key may be sent again after an unknown outcome,
// even by another process. A server older than the key's support ignores
// it.
func (c *Client) Grant(ctx context.Context, user string, amount int64, opts ...CallOption) (int64, error) {
	var out struct {
		Balance int64 `json:"balance"`
	}
	key := optsOf(opts).key
	err := c.do(ctx, call{method: http.MethodPost, path: path("wallet", "grant"), body: map[string]any{"user": user, "amount": amount},
		out: &out, safe: key != "", key: key})
	return out.Balance, err
}

// RemoveMessage removes a message from room's history; every member gets
// a MessageRemovedEvent. ErrUnknownMessage if it is not there.
func (c *Client) RemoveMessage(ctx context.Context, room, id string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: path("rooms", room, "messages", id)})
}

// Nodes lists the nodes that heartbeat recently.
func (c *Client) Nodes(ctx context.Context) ([]NodeInfo, error) {
	var out struct {
		Nodes []NodeInfo `json:"nodes"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("nodes"), out: &out, safe: true})
	return out.Nodes, err
}
