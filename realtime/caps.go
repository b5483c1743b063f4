package realtime

import (
	"context"
	"fmt"
	"time"

	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/ratelimit"
	"github.com/chatd/chatd/settings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// liveSettings reads the node's copy of the live settings.
type liveSettings interface {
	Int(key string) int
	Float(key string) float64
	String(key string) string
}

// Caps are the per-minute caps of the core, each a token bucket shared by
// every node (ratelimit): the one place where a cap's rule, its setting
// and its refusal are written. (The seat cap is the rooms service's, counted
// from the seat data.)
type Caps struct {
	settings liveSettings

	lobbies  *ratelimit.Limiter // new lobbies per user per minute
	boards   *ratelimit.Limiter // new boards per user per minute
	boardsIP *ratelimit.Limiter // new boards per client address per minute
	posts    *ratelimit.Limiter // score posts per user per minute
	sessions *ratelimit.Limiter // new sessions per client address in any 60 s (a sliding window)
}

// NewCaps builds the caps on rdb, their buckets under prefix, their
// limits read from the live settings st.
func NewCaps(rdb redis.UniversalClient, prefix string, now func() time.Time, reg prometheus.Registerer, st liveSettings) *Caps {
	perMinute := func(name, key string) *ratelimit.Limiter {
		perMin := func() float64 { return float64(st.Int(key)) }
		return ratelimit.New(rdb, ratelimit.Config{
			Prefix: keyspace.New(prefix).Prefix() + ":" + name, Now: now, Registerer: reg,
			Rate: func() float64 { return perMin() / 60 }, Burst: perMin,
		})
	}
	// "per minute" of new sessions means any 60 s: a sliding window, the
	// same on every node (a bucket of N refilling at N/60 let 2N through)
	sessionWindow := func() *ratelimit.Limiter {
		perMin := func() float64 { return float64(st.Int(settings.SessionsPerIPPerMin)) }
		return ratelimit.New(rdb, ratelimit.Config{
			Prefix: keyspace.New(prefix).Prefix() + ":sessions", Now: now, Registerer: reg,
			Burst: perMin, Window: time.Minute,
		})
	}
	return &Caps{
		settings: st,
		lobbies:  perMinute("newlobbies", settings.NewLobbiesPerUserPerMin),
		boards:   perMinute("newboards", settings.NewBoardsPerUserPerMin),
		boardsIP: perMinute("newboardsip", settingNewBoardsPerIP),
		posts:    perMinute("scoreposts", settingScorePostsPerMin),
		sessions: sessionWindow(),
	}
}

// take takes a token of key's bucket in l when the cap named by setting is
// on; a refusal is a *LimitError wrapping sentinel, worded by what.
func (cp *Caps) take(ctx context.Context, l *ratelimit.Limiter, setting, key string, sentinel error, what string) error {
	n := cp.settings.Int(setting)
	if n == 0 {
		return nil
	}
	ok, retry, err := l.Allow(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return &LimitError{Err: sentinel, Retry: max(retry, time.Second),
			Text: fmt.Sprintf("at most %d %s a minute (%s); retry in %.0f s", n, what, setting, max(1, retry.Round(time.Second).Seconds()))}
	}
	return nil
}

// AllowSession takes a token of the client address's bucket of new
// sessions (limit.sessions_per_ip_per_minute).
func (cp *Caps) AllowSession(ctx context.Context, addr string) error {
	key, err := identity.RateKey(addr)
	if err != nil {
		return nil // not an IP (a unix socket): nothing to count
	}
	return cp.take(ctx, cp.sessions, settings.SessionsPerIPPerMin, key, ErrTooManySessions, "new sessions from one address")
}

// lobbyExister tells whether a lobby has a room (rooms.Seats).
type lobbyExister interface {
	LobbyExists(ctx context.Context, lobby string) (bool, error)
}

// AllowLobby takes a token of the user's new-lobby bucket when lobby has
// no room yet (the join would create it). The seat cap
// (limit.seats_per_user) is the rooms service's: it counts a user's
// lobbies from the seat data in the join or reclaim itself.
func (cp *Caps) AllowLobby(ctx context.Context, seats lobbyExister, user, lobby string) error {
	if cp.settings.Int(settings.NewLobbiesPerUserPerMin) == 0 {
		return nil
	}
	exists, err := seats.LobbyExists(ctx, lobby)
	if err != nil || exists {
		return err
	}
	return cp.take(ctx, cp.lobbies, settings.NewLobbiesPerUserPerMin, user, ErrTooManyLobbies,
		"new lobbies; join an existing lobby (GET /api/v1/lobbies)")
}

// BoardCapsOn reports whether a new board is capped at all (per user or
// per address): only then must a post ask whether its board exists.
func (cp *Caps) BoardCapsOn() bool {
	return cp.settings.Int(boardCapsOn) > 0 || cp.settings.Int(settingNewBoardsPerIP) > 0
}

// AllowBoard takes a token of the new-board buckets of the user and of the
// client address. It returns an error matching ErrTooManyBoards when
// either is empty, and Redis errors.
func (cp *Caps) AllowBoard(ctx context.Context, user, addr string) error {
	if err := cp.take(ctx, cp.boards, settings.NewBoardsPerUserPerMin, user, ErrTooManyBoards, "new leaderboards; post to an existing one"); err != nil {
		return err
	}
	if key, err := identity.RateKey(addr); err == nil {
		return cp.take(ctx, cp.boardsIP, settingNewBoardsPerIP, key, ErrTooManyBoards, "new leaderboards from one address")
	}
	return nil
}

// AllowPost takes a token of the user's score-post bucket. It returns an
// error matching ErrTooManyPosts when it is empty, and Redis errors.
func (cp *Caps) AllowPost(ctx context.Context, user string) error {
	return cp.take(ctx, cp.posts, settingScorePostsPerMin, user, ErrTooManyPosts, "score posts")
}
