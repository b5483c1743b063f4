package rooms

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redisx"
)

// ErrTooManyLobbies is returned by Join and Reclaim for a lobby the user
// holds no seat in when they already hold seats in Config.MaxLobbiesPerUser
// lobbies; the wrapping text says the cap ("you hold seats in 2 lobbies,
// the most allowed; leave one first").
var ErrTooManyLobbies = errcode.New(errcode.RateLimited, "rooms: seated in too many lobbies")

// The seat cap. A user's lobbies live in as many Cluster slots, so no
// script can count them; the user's index ({user:U}:lobbies, in the user's
// slot) lists the candidates, and the lobbies' seat data say which count:
//
//  1. read the index and the user's seat in the lobby joined, in one
//     pipeline (ZRANGE; ZSCORE members, leases): a live seat there that
//     the index lists needs no check (a rejoin: one round trip);
//  2. for a new seat, look up the user's seat in every other candidate in
//     one pipeline;
//  3. in one script on the index: drop the candidates with no live seat
//     and no reservation in flight (compare-and-delete on their scores),
//     then reserve the lobby joined (its score now: pending) unless as
//     many entries as the cap are left; a lobby listed already is
//     reserved again in place (it is counted). Two joins of one user run
//     this script one after the other, so they cannot both take the last
//     place, and a join cannot drop a candidate another join just
//     reserved again;
//  4. seat; then confirm the reservation (score 0: it counts from now on
//     while the seat lives), or release it when the join certainly failed.
//
// A reservation counts as pending — whatever the seat data say — for
// reservePending after it was made, the longest a join may take (waiting in
// its lobby's queue, then its own batch); a join whose outcome is unknown
// (a Redis error, a timeout) leaves its reservation to age out of that.
// The naive check, counting the lobbies in the user's presence, lags: three
// joins before any poll all pass it, and a resume skips it.

// seatCap is the cap on the lobbies a user holds seats in
// (Config.MaxLobbiesPerUser), checked by Seats.Join and Seats.Reclaim. It
// owns each user's index of lobbies (userLobbiesKey) and
// lua/lobbies_reserve.lua; it reads the seat data of the lobbies.
type seatCap struct {
	*base
	limit   func() int    // Config.MaxLobbiesPerUser; nil means no cap
	pending time.Duration // reservePending of the Seats' lock TTL
}

// maxLobbies is the live cap, 0 for none.
func (s *seatCap) maxLobbies() int {
	if s.limit == nil {
		return 0
	}
	return max(s.limit(), 0)
}

// reservePending is how long a reservation counts whatever the seat data
// say: twice the longest a seat batch may run (seatBatch's timeout, for a
// lock TTL of lockTTL).
func reservePending(lockTTL time.Duration) time.Duration { return 2 * (2*lockTTL + 5*time.Second) }

// reservation is a place taken in a user's index by reserve, to
// confirm or release once the join is done; the zero value is none.
type reservation struct {
	user, lobby string
	score       int64
}

// reserve checks the cap for user joining lobby and reserves a place for
// it in the user's index. It returns an error wrapping ErrTooManyLobbies
// at the cap, and Redis errors.
func (s *seatCap) reserve(ctx context.Context, user, lobby string) (reservation, error) {
	limit := s.maxLobbies()
	if limit == 0 {
		return reservation{}, nil
	}
	index := userLobbiesKey(s.ks, user)
	now := s.now()
	nowMs := now.UnixMilli()
	type seat struct{ at, exp *redis.FloatCmd }
	lookup := func(p redis.Pipeliner, l string) seat {
		return seat{p.ZScore(ctx, membersKey(s.ks, l), user), p.ZScore(ctx, leasesKey(s.ks, l), user)}
	}
	live := func(st seat) bool { return st.at.Err() == nil && st.exp.Err() == nil && int64(st.exp.Val()) > nowMs }
	// One round trip for the common case, a join of a lobby the user sits
	// in: the index and the seat there.
	pipe := s.rdb.Pipeline()
	list := pipe.ZRangeWithScores(ctx, index, 0, -1)
	target := lookup(pipe, lobby)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return reservation{}, err
	}
	entries := list.Val()
	indexed := false
	for _, e := range entries {
		indexed = indexed || e.Member == lobby
	}
	if live(target) && indexed {
		return reservation{}, nil // a seat there, counted already
	}
	args := []any{nowMs, limit, lobby, s.indexTTL().Milliseconds(), "", 0}
	if live(target) {
		args[1] = 0 // a seat there the index missed: index it, whatever the count
	} else {
		// A new seat: check the other candidates' seats.
		pipe := s.rdb.Pipeline()
		seats := make([]seat, len(entries))
		for i, e := range entries {
			if e.Member != lobby {
				seats[i] = lookup(pipe, e.Member.(string))
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return reservation{}, err
		}
		pending := now.Add(-s.pending).UnixMilli()
		for i, e := range entries {
			if e.Member != lobby && !live(seats[i]) && (e.Score == 0 || int64(e.Score) < pending) {
				args = append(args, e.Member, int64(e.Score))
			}
		}
	}
	v, err := redisx.Run(ctx, s.rdb, lobbiesReserveScript, []string{index}, args...).Int64Slice()
	if err != nil {
		return reservation{}, err
	}
	if len(v) != 2 {
		return reservation{}, errUnexpectedReply
	}
	if v[0] == 0 {
		return reservation{}, fmt.Errorf("%w: you hold seats in %d lobbies, the most allowed; leave one first", ErrTooManyLobbies, v[1])
	}
	return reservation{user: user, lobby: lobby, score: nowMs}, nil
}

// indexTTL is how long a user's index lives after its last change: as long
// as an idle lobby.
func (s *seatCap) indexTTL() time.Duration { return max(s.idleTTL, s.pending) }

// settle confirms r when the join seated its user (err nil) and releases
// it when the join certainly did not; a join that may have seated (a Redis
// or context error) leaves r to age out. Failures are counted, not
// returned: the join's answer stands.
func (s *seatCap) settle(ctx context.Context, r reservation, err error) {
	if r.lobby == "" {
		return
	}
	args := []any{s.now().UnixMilli(), 0, "", s.indexTTL().Milliseconds(), "", 0}
	switch {
	case err == nil:
		args[4], args[5] = r.lobby, r.score
	case errors.Is(err, ErrRoomFull), errors.Is(err, ErrSeatedElsewhere), errors.Is(err, ErrUnknownRoom), errors.Is(err, ErrBusy):
		args = append(args, r.lobby, r.score)
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := redisx.Run(ctx, s.rdb, lobbiesReserveScript, []string{userLobbiesKey(s.ks, r.user)}, args...).Err(); err != nil {
		s.m.counterErrors.Inc()
	}
}
