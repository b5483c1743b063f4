// Package game is the game use case: leaderboards, the seen filters and
// the shop, over the domain packages ranking, seen and shop, with the
// realtime core's caps (new boards per user and per address, score posts
// per user) and one side effect of its own: a post makes the poster follow
// the board, so that the ranking hook's mark of the board's followers
// (wired in the core) reaches the poster's own sessions too. A purchase or
// a grant marks the wallet through the shop hook, also wired in the core.
//
// It needs the core only for its Principal, BoardTopic and the caps, and
// no other use case.
package game

import (
	"context"
	"log/slog"
	"time"

	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/seen"
	"github.com/chatd/chatd/shop"
)

// boardStore is what the game use case needs of the leaderboards.
type boardStore interface {
	PostWith(ctx context.Context, board, player string, score ranking.Score, mode ranking.Mode, opts ranking.PostOptions) (ranking.PostResult, error)
	Exists(ctx context.Context, board string) (bool, error)
	Top(ctx context.Context, board string, limit int) ([]ranking.Entry, error)
	Get(ctx context.Context, board, player string) (ranking.Entry, error)
	Around(ctx context.Context, board, player string, radius int) ([]ranking.Entry, error)
	Range(ctx context.Context, board string, min, max *ranking.Score, limit int) ([]ranking.Entry, error)
	Ranks(ctx context.Context, board string, players []string) ([]ranking.Entry, error)
}

// shopStore is what the game use case needs of the shop.
type shopStore interface {
	Items(ctx context.Context) ([]shop.Item, error)
	Stock(ctx context.Context, item string, stock, price int64) error
	GrantWith(ctx context.Context, user string, amount int64, key string) (int64, error)
	Wallet(ctx context.Context, user string) (shop.Wallet, error)
	Buy(ctx context.Context, user, item string, qty int64, idemKey string) (shop.Wallet, error)
}

// seenFilter is what the game use case needs of the seen filters.
type seenFilter interface {
	MarkFor(ctx context.Context, user string, items []string, ttl time.Duration) error
	Unseen(ctx context.Context, user string, items []string) ([]string, error)
}

// follower makes a user follow a topic (a board) for its polls.
type follower interface {
	FollowFor(ctx context.Context, topic, user string, ttl time.Duration) error
}

// caps are the core's caps a score post takes.
type caps interface {
	BoardCapsOn() bool
	AllowBoard(ctx context.Context, user, addr string) error
	AllowPost(ctx context.Context, user string) error
}

var (
	_ boardStore = (*ranking.Service)(nil)
	_ shopStore  = (*shop.Shop)(nil)
	_ seenFilter = (*seen.Filter)(nil)
	_ caps       = (*realtime.Caps)(nil)
)

// Config configures a Game; every field but Logger is required.
type Config struct {
	Boards  boardStore
	Shop    shopStore
	Seen    seenFilter
	Follows follower
	Caps    caps
	// Logger receives the debug logs; nil = slog.Default().
	Logger *slog.Logger
}

// Game is the game use case.
type Game struct {
	boards  boardStore
	shop    shopStore
	seen    seenFilter
	follows follower
	caps    caps
	log     *slog.Logger
}

// New returns the game use case.
func New(cfg Config) *Game {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Game{boards: cfg.Boards, shop: cfg.Shop, seen: cfg.Seen, follows: cfg.Follows, caps: cfg.Caps, log: cfg.Logger}
}

// PostScore posts a player's score (a decimal number as the client sent
// it: ranking.ParseScore) to a board as p's user, in mode "best", "incr" or
// "set" ("" = best); key is the request's Idempotency-Key ("" = none): the
// same user posting the same key again gets the first answer and changes
// nothing. The poster follows the board (its polls then carry
// the board).
func (g *Game) PostScore(ctx context.Context, p realtime.Principal, board, player, score, mode, key string) (ranking.Entry, error) {
	if err := names.Board(board); err != nil {
		return ranking.Entry{}, err
	}
	sc, err := ranking.ParseScore(score)
	if err != nil {
		return ranking.Entry{}, err
	}
	if err := names.Player(player); err != nil {
		return ranking.Entry{}, err // a bad post costs no token
	}
	if err := g.caps.AllowPost(ctx, p.User); err != nil {
		return ranking.Entry{}, err
	}
	if g.caps.BoardCapsOn() {
		exists, err := g.boards.Exists(ctx, board)
		if err != nil {
			return ranking.Entry{}, err
		}
		if !exists {
			if err := g.caps.AllowBoard(ctx, p.User, p.Addr); err != nil {
				return ranking.Entry{}, err
			}
		}
	}
	// follow first, then post: the mark a changing post makes reaches the
	// poster's own sessions too
	if err := g.follows.FollowFor(ctx, realtime.BoardTopic(board), p.User, p.Life()); err != nil {
		g.log.Debug("follow board", "err", err)
	}
	opts := ranking.PostOptions{IdleTTL: p.Life()}
	if key != "" {
		opts.Key, opts.Scope = key, p.User
	}
	res, err := g.boards.PostWith(ctx, board, player, sc, ranking.Mode(mode), opts)
	return res.Entry, err
}

// Top returns a board's best entries.
func (g *Game) Top(ctx context.Context, board string, limit int) ([]ranking.Entry, error) {
	return g.boards.Top(ctx, board, limit)
}

// Player returns a player's entry on a board.
func (g *Game) Player(ctx context.Context, board, player string) (ranking.Entry, error) {
	return g.boards.Get(ctx, board, player)
}

// Around returns the entries around a player.
func (g *Game) Around(ctx context.Context, board, player string, radius int) ([]ranking.Entry, error) {
	return g.boards.Around(ctx, board, player, radius)
}

// Range returns the entries with scores in [min, max], each a decimal
// number or "" for an open end.
func (g *Game) Range(ctx context.Context, board, min, max string, limit int) ([]ranking.Entry, error) {
	var bounds [2]*ranking.Score
	for i, raw := range []string{min, max} {
		if raw != "" {
			v, err := ranking.ParseScore(raw)
			if err != nil {
				return nil, err
			}
			bounds[i] = &v
		}
	}
	return g.boards.Range(ctx, board, bounds[0], bounds[1], limit)
}

// Ranks returns the entries of many players, in one pipeline.
func (g *Game) Ranks(ctx context.Context, board string, players []string) ([]ranking.Entry, error) {
	return g.boards.Ranks(ctx, board, players)
}

// MarkSeen marks items seen for p's user.
func (g *Game) MarkSeen(ctx context.Context, p realtime.Principal, items []string) error {
	return g.seen.MarkFor(ctx, p.User, items, p.Life())
}

// Unseen returns the items p's user has not seen (bloom filter: a seen
// item is never reported unseen; an unseen one may, rarely, be taken for
// seen).
func (g *Game) Unseen(ctx context.Context, p realtime.Principal, items []string) ([]string, error) {
	return g.seen.Unseen(ctx, p.User, items)
}

// Items returns the shop's items.
func (g *Game) Items(ctx context.Context) ([]shop.Item, error) { return g.shop.Items(ctx) }

// Stock sets an item's stock and price (admin).
func (g *Game) Stock(ctx context.Context, item string, stock, price int64) error {
	return g.shop.Stock(ctx, item, stock, price)
}

// Grant adds coins to a user's wallet (admin), once per idempotency key
// (none when ""): see shop.Shop.GrantWith.
func (g *Game) Grant(ctx context.Context, user string, amount int64, key string) (int64, error) {
	if err := names.User(user); err != nil {
		return 0, err
	}
	return g.shop.GrantWith(ctx, user, amount, key)
}

// Wallet returns p's user's wallet.
func (g *Game) Wallet(ctx context.Context, p realtime.Principal) (shop.Wallet, error) {
	return g.shop.Wallet(ctx, p.User)
}

// Buy buys qty of item for p's user (WATCH/MULTI/EXEC); key is the
// request's Idempotency-Key ("" = none).
func (g *Game) Buy(ctx context.Context, p realtime.Principal, item string, qty int64, key string) (shop.Wallet, error) {
	return g.shop.Buy(ctx, p.User, item, qty, key)
}
