package rooms

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
)

// Lobby listing limits.
const (
	DefaultLobbiesLimit = 50
	MaxLobbiesLimit     = 500
)

// lobbyTombstone is how long the lobby index remembers a lobby it removed
// (count 0), so that a count taken before the removal and delivered after it
// is refused. Counts are delivered within a request's timeout, seconds.
const lobbyTombstone = 10 * time.Minute

// lobbyCountBatch is the most lobbies one lobbies_count.lua call takes.
const lobbyCountBatch = 500

// LobbyInfo is a lobby with seated users, as Lobbies.List lists it.
type LobbyInfo struct {
	Lobby  string
	Online int // seated users (a seat whose lease ran out counts until it is reaped)
	Rooms  int // rooms the lobby has (rooms are kept until the lobby idles out)
}

// Lobbies lists the lobbies that have seated users (List), from one global
// index in a slot of its own ({rooms:index}: onlineKey, onlineInfoKey,
// onlineGoneKey), written by lua/lobbies_count.lua and read by
// lua/lobbies_top.lua. The seat scripts cannot write it (CROSSSLOT on
// Cluster): Seats hands it each lobby's count after the script's reply
// (indexCounts), and holds the counts it saw for the next Renew to send
// along (holdCounts, queueCounts). See the package doc, "the lobby
// listing".
type Lobbies struct {
	*base

	heldMu sync.Mutex
	held   map[string]lobbyCount // lobby → count for the next Renew to index
}

// List returns up to limit lobbies that have seated users, most seated
// first and ties by name: one read of the global lobby index. limit 0 or
// less means DefaultLobbiesLimit (50); above MaxLobbiesLimit (500) means 500.
//
// The index is written by Go after each seat script that changed a lobby's
// seated users or rooms (and on every Renew and Sweep), not by the script
// itself: on Redis Cluster the index is in a slot of its own and a script
// may touch only its lobby's slot. So it lags a seat change by one round
// trip, and a count whose write failed stays stale until the lobby's next
// change, renewal or sweep. Out-of-order writes are harmless: every count
// carries a stamp from the lobby's own slot, and the index keeps the
// newest. That is what a lobby listing needs — a popularity view, not a
// seat ledger; whether a user may join is decided by the seat scripts.
// It returns Redis errors wrapped.
func (s *Lobbies) List(ctx context.Context, limit int) ([]LobbyInfo, error) {
	if limit <= 0 {
		limit = DefaultLobbiesLimit
	}
	limit = min(limit, MaxLobbiesLimit)
	v, err := redisx.Run(ctx, s.rdb, lobbiesTopScript, []string{onlineKey(s.ks), onlineInfoKey(s.ks)}, limit).Slice()
	if err != nil {
		return nil, fmt.Errorf("rooms: lobbies: %w", err)
	}
	out := make([]LobbyInfo, 0, len(v)/3)
	for i := 0; i+2 < len(v); i += 3 {
		name, ok1 := v[i].(string)
		online, ok2 := v[i+1].(int64)
		rooms, ok3 := v[i+2].(int64)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("rooms: lobbies: %w", errUnexpectedReply)
		}
		out = append(out, LobbyInfo{Lobby: name, Online: int(online), Rooms: int(rooms)})
	}
	return out, nil
}

// lobbyCount is a lobby's count as a seat script reported it (lobby_count
// in lua/lobby_lib.lua).
type lobbyCount struct {
	lobby                string
	online, rooms, stamp int64
	changed              bool
}

// countOf reads a lobbyCount from the four values {online, rooms, stamp,
// changed} that end a seat script's reply; ok is false when v is not that.
func countOf(lobby string, v []any) (c lobbyCount, ok bool) {
	if len(v) != 4 {
		return lobbyCount{}, false
	}
	n := make([]int64, 4)
	for i, x := range v {
		if n[i], ok = x.(int64); !ok {
			return lobbyCount{}, false
		}
	}
	return lobbyCount{lobby: lobby, online: n[0], rooms: n[1], stamp: n[2], changed: n[3] == 1}, true
}

// countOfInts is countOf for replies read with Int64Slice.
func countOfInts(lobby string, v []int64) (lobbyCount, bool) {
	if len(v) != 4 {
		return lobbyCount{}, false
	}
	return lobbyCount{lobby: lobby, online: v[0], rooms: v[1], stamp: v[2], changed: v[3] == 1}, true
}

// indexCounts copies the counts that changed into the global lobby index
// (counts with stamp 0, nothing to index, are skipped). It runs after the
// seat scripts' replies; a failure is counted (counterErrors) and left to
// the next Renew of a node with an attachment in the lobby, which sends
// every count along (holdCounts): the seat operation itself succeeded.
func (s *Lobbies) indexCounts(ctx context.Context, counts ...lobbyCount) {
	var changed []lobbyCount
	for _, c := range counts {
		if c.changed && c.stamp > 0 {
			changed = append(changed, c)
		}
	}
	args := countArgs(changed)
	switch len(args) {
	case 0:
	case 1:
		if err := redisx.Run(ctx, s.rdb, lobbiesCountScript, s.countKeys(), args[0]...).Err(); err != nil {
			s.m.counterErrors.Inc()
		}
	default:
		var cmds []*redis.Cmd
		_ = redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) { // errors are read per command
			for _, a := range args {
				cmds = append(cmds, p.Script(lobbiesCountScript, s.countKeys(), a...))
			}
		})
		s.checkCounts(cmds)
	}
}

// countArgs turns counts into the ARGV of lobbies_count.lua calls, at most
// lobbyCountBatch lobbies each.
func countArgs(counts []lobbyCount) [][]any {
	var args [][]any
	for _, c := range counts {
		if len(args) == 0 || len(args[len(args)-1]) >= 1+4*lobbyCountBatch {
			args = append(args, []any{lobbyTombstone.Microseconds()})
		}
		last := &args[len(args)-1]
		*last = append(*last, c.lobby, c.online, c.rooms, strconv.FormatInt(c.stamp, 10))
	}
	return args
}

// holdCounts keeps counts for the next Renew to send along (queueCounts),
// replacing older ones of the same lobby.
func (s *Lobbies) holdCounts(counts []lobbyCount) {
	s.heldMu.Lock()
	defer s.heldMu.Unlock()
	if s.held == nil {
		s.held = map[string]lobbyCount{}
	}
	for _, c := range counts {
		if c.stamp > 0 && c.stamp >= s.held[c.lobby].stamp {
			s.held[c.lobby] = c
		}
	}
}

// queueCounts adds the counts held by holdCounts to p, in batches, and
// forgets them; it returns the scripts' commands, for checkCounts.
func (s *Lobbies) queueCounts(p *redisx.Pipe) []*redis.Cmd {
	s.heldMu.Lock()
	held := s.held
	s.held = nil
	s.heldMu.Unlock()
	counts := make([]lobbyCount, 0, len(held))
	for _, c := range held {
		counts = append(counts, c)
	}
	var cmds []*redis.Cmd
	for _, a := range countArgs(counts) {
		cmds = append(cmds, p.Script(lobbiesCountScript, s.countKeys(), a...))
	}
	return cmds
}

// checkCounts counts the index writes that failed.
func (s *Lobbies) checkCounts(cmds []*redis.Cmd) {
	for _, cmd := range cmds {
		if cmd.Err() != nil {
			s.m.counterErrors.Inc()
		}
	}
}

// countKeys are the KEYS of lobbies_count.lua.
func (s *Lobbies) countKeys() []string {
	return []string{onlineKey(s.ks), onlineInfoKey(s.ks), onlineGoneKey(s.ks)}
}
