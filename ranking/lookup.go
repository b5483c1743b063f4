package ranking

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// GetMany returns player's entry on each of boards (in the current period of
// a periodic board), keyed by the board name as asked; a board where the
// player has no score, or that does not exist, is absent from the map. It
// is one pipeline of one read script per board (on a Cluster go-redis sends
// one pipeline per shard, in parallel), so a poll that shows a player's
// place on many boards pays one round trip. A board asked twice is read
// once.
//
// Errors: names.ErrBadName (for the player or any board, before anything is
// sent), ErrBatchTooLarge beyond MaxBatch boards; Redis errors wrapped.
func (s *Service) GetMany(ctx context.Context, boards []string, player string) (map[string]Entry, error) {
	defer s.m.observe("get_many", time.Now())
	wrap := func(err error) error { return fmt.Errorf("ranking: %s on %d boards: %w", player, len(boards), err) }
	if err := names.Player(player); err != nil {
		return nil, wrap(err)
	}
	if len(boards) > MaxBatch {
		return nil, wrap(fmt.Errorf("%w: %d boards (at most %d)", ErrBatchTooLarge, len(boards), MaxBatch))
	}
	unique := make([]string, 0, len(boards))
	seen := make(map[string]bool, len(boards))
	for _, b := range boards {
		if err := names.Board(b); err != nil {
			return nil, wrap(err)
		}
		if !seen[b] {
			seen[b] = true
			unique = append(unique, b)
		}
	}
	out := make(map[string]Entry, len(unique))
	if len(unique) == 0 {
		return out, nil
	}
	canon := names.Canonical(player)
	cmds := make([]*redis.Cmd, len(unique))
	// One pipeline; a server that does not hold the script (a restart, a
	// new Cluster master) gets the NOSCRIPT'ed ones again as EVAL.
	err := redisx.Pipelined(ctx, s.rdb, func(pipe *redisx.Pipe) {
		for i, b := range unique {
			p := s.period(b)
			cmds[i] = pipe.Script(ranksScript, []string{boardKey(s.sp, p.id), playersKey(s.sp, p.id)}, canon)
		}
	})
	if err != nil {
		return nil, wrap(err)
	}
	for i, b := range unique {
		res, err := cmds[i].Slice()
		if err != nil {
			return nil, wrap(err)
		}
		if len(res) != 2 {
			return nil, wrap(fmt.Errorf("ranking: ranks script answered %d values for 1 player", len(res)))
		}
		e, err := entryOf(player, res[0], res[1])
		if err != nil {
			return nil, wrap(err)
		}
		if e.Rank >= 0 {
			out[b] = e
		}
	}
	return out, nil
}

// Exists reports whether board has any entry now (in its current period for
// a periodic board): one [EXISTS]. The web layer asks it before a post to
// tell the creation of a board, which it rate-limits per user, from a post
// to an existing one. A board that expired when idle no longer exists.
//
// Errors: names.ErrBadName; Redis errors wrapped.
//
// [EXISTS]: https://redis.io/commands/exists/
func (s *Service) Exists(ctx context.Context, board string) (bool, error) {
	if err := names.Board(board); err != nil {
		return false, fmt.Errorf("ranking: exists %s: %w", board, err)
	}
	n, err := s.rdb.Exists(ctx, boardKey(s.sp, s.period(board).id)).Result()
	if err != nil {
		return false, fmt.Errorf("ranking: exists %s: %w", board, err)
	}
	return n == 1, nil
}

// entryOf decodes one player's answer of the ranks script: its member and
// rank, or "" and -1 (then the entry has Rank -1 and the player as asked).
func entryOf(player string, member, rank any) (Entry, error) {
	r, ok := rank.(int64)
	if !ok {
		return Entry{}, fmt.Errorf("ranking: ranks script answered %v", rank)
	}
	if r < 0 {
		return Entry{Player: player, Rank: -1}, nil
	}
	m, _ := member.(string)
	shown, sc, err := decodeMember(m)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Player: shown, Score: sc, Rank: r}, nil
}
