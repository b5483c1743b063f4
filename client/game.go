package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Leaderboards. A board is a lobby-style name, optionally with @daily or
// @weekly (a board per UTC day or ISO week).

// Top returns the best entries of board, best first; limit 0 takes the
// server's default (100), at most 1000.
func (c *Client) Top(ctx context.Context, board string, limit int) ([]Entry, error) {
	return c.entries(ctx, path("leaderboards", board, "top"), limitQuery("limit", limit))
}

// Player returns player's entry on board; ErrUnknownPlayer if it has none.
func (c *Client) Player(ctx context.Context, board, player string) (Entry, error) {
	var out struct {
		Entry Entry `json:"entry"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("leaderboards", board, "players", player), out: &out, safe: true})
	return out.Entry, err
}

// Around returns up to radius entries above player, player's, and up to
// radius below (radius 0–500; ErrUnknownPlayer if it has no score).
func (c *Client) Around(ctx context.Context, board, player string, radius int) ([]Entry, error) {
	q := url.Values{"radius": {strconv.Itoa(radius)}}
	return c.entries(ctx, path("leaderboards", board, "around", player), q)
}

// RangeOptions bound a Range query; nil bounds are open.
type RangeOptions struct {
	Min, Max *float64 // inclusive score bounds
	Limit    int      // 0 = the server's default (100), at most 1000
}

// Range returns the entries of board with scores within o, best first.
func (c *Client) Range(ctx context.Context, board string, o RangeOptions) ([]Entry, error) {
	q := limitQuery("limit", o.Limit)
	if o.Min != nil {
		q.Set("min", strconv.FormatFloat(*o.Min, 'f', -1, 64))
	}
	if o.Max != nil {
		q.Set("max", strconv.FormatFloat(*o.Max, 'f', -1, 64))
	}
	return c.entries(ctx, path("leaderboards", board, "range"), q)
}

// Ranks returns the entries of players (at most 1000) in the order asked,
// from one snapshot; a player without a score has rank -1.
func (c *Client) Ranks(ctx context.Context, board string, players []string) ([]Entry, error) {
	var out struct {
		Entries []Entry `json:"entries"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("leaderboards", board, "ranks"),
		body: map[string][]string{"players": players}, out: &out, safe: true})
	return out.Entries, err
}

func (c *Client) entries(ctx context.Context, p string, q url.Values) ([]Entry, error) {
	var out struct {
		Entries []Entry `json:"entries"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: p, query: q, out: &out, safe: true})
	return out.Entries, err
}

// Score is a score post.
type Score struct {
	Player string    `json:"player"`
	Score  float64   `json:"score"`
	Mode   ScoreMode `json:"mode,omitempty"` // "" = ScoreBest
}

// PostScore posts a score to board and returns the player's entry.
// Like Post, each call carries an Idempotency-Key repeated on its retries:
// on servers that deduplicate score posts by key, a retried ScoreIncr
// adds once.
func (c *Client) PostScore(ctx context.Context, board string, s Score, opts ...CallOption) (Entry, error) {
	var out struct {
		Entry Entry `json:"entry"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("leaderboards", board, "scores"),
		body: s, out: &out, safe: true, key: idemKey(opts)})
	return out.Entry, err
}

// MarkSeen marks items (1–256 bytes each, at most 1000) seen by the user.
func (c *Client) MarkSeen(ctx context.Context, items []string) error {
	return c.do(ctx, call{method: http.MethodPost, path: path("seen"), body: map[string][]string{"items": items}, safe: true})
}

// Unseen returns the items the user has not marked seen, in the order
// given. A marked item is never returned; an unmarked one is held back at
// most at the seen filter's false-positive rate.
func (c *Client) Unseen(ctx context.Context, items []string) ([]string, error) {
	var out struct {
		Unseen []string `json:"unseen"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("seen", "filter"), body: map[string][]string{"items": items}, out: &out, safe: true})
	return out.Unseen, err
}

// Items lists the shop's items by name.
func (c *Client) Items(ctx context.Context) ([]Item, error) {
	var out struct {
		Items []Item `json:"items"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("shop", "items"), out: &out, safe: true})
	return out.Items, err
}

// Buy buys qty units of item (qty 0 means 1) and returns the wallet after
// the purchase: ErrUnknownItem, ErrSoldOut, ErrInsufficientFunds.
//
// Each call sends a fresh Idempotency-Key (or WithIdempotencyKey's) and
// repeats it on every retry, including the retries of a conflict answer:
// the server stores the first answer for the key and buys at most once.
func (c *Client) Buy(ctx context.Context, item string, qty int64, opts ...CallOption) (Wallet, error) {
	if qty == 0 {
		qty = 1
	}
	var out Wallet
	err := c.do(ctx, call{method: http.MethodPost, path: path("shop", "buy"),
		body: map[string]any{"item": item, "qty": qty}, out: &out, safe: true, key: idemKey(opts)})
	return out, err
}

// Wallet returns the user's balance and items.
func (c *Client) Wallet(ctx context.Context) (Wallet, error) {
	var out Wallet
	err := c.do(ctx, call{method: http.MethodGet, path: path("wallet"), out: &out, safe: true})
	return out, err
}

// Settings returns every live setting and the settings version.
func (c *Client) Settings(ctx context.Context) (Settings, error) {
	var out Settings
	err := c.do(ctx, call{method: http.MethodGet, path: path("settings"), out: &out, safe: true})
	return out, err
}

// SettingDefs describes the live settings in registry order.
func (c *Client) SettingDefs(ctx context.Context) ([]SettingDef, error) {
	var out struct {
		Settings []SettingDef `json:"settings"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("settings", "defs"), out: &out, safe: true})
	return out.Settings, err
}
