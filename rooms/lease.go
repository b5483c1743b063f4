package rooms

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Seats are leases: a seat's score in its room's ZSET is the time it
// expires. The node that holds a user's connection renews it (Renew, all of
// the node's seats in one pipelined round trip per tick); a node that stops
// renewing — killed, partitioned, paused — loses its users' seats one lease
// later, when the seat script or the sweeper reaps them.

// Renew extends the lease of every seat in seats to now + the lease, in one
// pipelined round trip: one script per lobby, all of the lobby's seats in
// its arguments. It returns the seats that no longer exist (never held,
// freed, reaped, or expired: an expired one is reaped now), which the
// caller should drop and tell their users. Call it for the node's seats at
// least every third of the lease. A malformed room id is returned as lost.
// It returns Redis errors wrapped; lost is then nil.
func (s *Service) Renew(ctx context.Context, seats []Seat) (lost []Seat, err error) {
	if len(seats) == 0 {
		return nil, nil
	}
	now := s.now()
	nowMs, expMs := ms(now), ms(now.Add(s.leaseDur()))
	type batch struct {
		lobby string
		idx   []int // positions in seats
		args  []any
		cmd   *redis.Cmd
	}
	var batches []*batch
	byLobby := map[string]*batch{}
	for i, st := range seats {
		lobby, seq, err := ParseRoom(st.Room)
		if err != nil || st.User == "" {
			lost = append(lost, st)
			continue
		}
		b := byLobby[lobby]
		if b == nil {
			b = &batch{lobby: lobby, args: []any{nowMs, expMs, lobby, channelPrefix(s.ks, lobby)}}
			byLobby[lobby] = b
			batches = append(batches, b)
		}
		b.idx = append(b.idx, i)
		b.args = append(b.args, seq, st.User)
	}
	keys := func(lobby string) []string {
		return []string{usersKey(s.ks, lobby), openKey(s.ks, lobby), dueKey(s.ks, lobby), seatsPrefix(s.ks, lobby)}
	}
	pipe := s.rdb.Pipeline()
	for _, b := range batches {
		b.cmd = seatRenewScript.EvalSha(ctx, pipe, keys(b.lobby), b.args...)
		// Keep the lobby known to the sweeper, should its index be lost.
		pipe.ZAddNX(ctx, lobbiesKey(s.ks), redis.Z{Score: float64(now.UnixMilli()), Member: b.lobby})
	}
	if _, err := pipe.Exec(ctx); err != nil && !isNoScript(err) {
		return nil, fmt.Errorf("rooms: renew %d seats: %w", len(seats), err)
	}
	for _, b := range batches {
		if isNoScript(b.cmd.Err()) {
			b.cmd = seatRenewScript.Run(ctx, s.rdb, keys(b.lobby), b.args...)
		}
		gone, err := b.cmd.Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("rooms: renew seats in %s: %w", b.lobby, err)
		}
		for _, g := range gone {
			if g >= 1 && int(g) <= len(b.idx) {
				lost = append(lost, seats[b.idx[g-1]])
			}
		}
	}
	return lost, nil
}

// Sweep limits: lobbies per round trip, rooms per lobby per script run, and
// rounds per Sweep (the rest waits for the next one).
const (
	sweepLobbies = 128
	sweepRooms   = 256
	sweepRounds  = 32
)

// Sweep reaps the expired seats of every lobby, publishing a "left" event
// for each, and returns how many it removed. It finds them cheaply: a
// global index scores each lobby with a lower bound of its earliest lease
// expiry, and each lobby's index does the same for its rooms, so a sweep
// with nothing due is one ZRANGEBYSCORE. Several nodes may sweep at once.
// It returns Redis errors wrapped, with the count reaped so far.
func (s *Service) Sweep(ctx context.Context) (reaped int, err error) {
	now := s.now()
	nowMs := now.UnixMilli()
	leaseMs := s.leaseDur().Milliseconds()
	for round := 0; round < sweepRounds; round++ {
		lobbies, err := s.rdb.ZRangeByScore(ctx, lobbiesKey(s.ks), &redis.ZRangeBy{
			Min: "-inf", Max: strconv.FormatInt(nowMs, 10), Count: sweepLobbies,
		}).Result()
		if err != nil {
			return reaped, fmt.Errorf("rooms: sweep: %w", err)
		}
		if len(lobbies) == 0 {
			return reaped, nil
		}
		keys := func(lobby string) []string {
			return []string{usersKey(s.ks, lobby), openKey(s.ks, lobby), dueKey(s.ks, lobby), seatsPrefix(s.ks, lobby)}
		}
		args := func(lobby string) []any {
			return []any{nowMs, sweepRooms, lobby, channelPrefix(s.ks, lobby)}
		}
		cmds := make([]*redis.Cmd, len(lobbies))
		pipe := s.rdb.Pipeline()
		for i, lobby := range lobbies {
			cmds[i] = lobbySweepScript.EvalSha(ctx, pipe, keys(lobby), args(lobby)...)
		}
		if _, err := pipe.Exec(ctx); err != nil && !isNoScript(err) {
			return reaped, fmt.Errorf("rooms: sweep %d lobbies: %w", len(lobbies), err)
		}
		next := make([]redis.Z, 0, len(lobbies))
		for i, lobby := range lobbies {
			if isNoScript(cmds[i].Err()) {
				cmds[i] = lobbySweepScript.Run(ctx, s.rdb, keys(lobby), args(lobby)...)
			}
			v, err := cmds[i].Slice()
			if err != nil || len(v) != 3 {
				return reaped, fmt.Errorf("rooms: sweep %s: %w (reply %v)", lobby, err, v)
			}
			n, _ := v[0].(int64)
			visited, _ := v[1].(int64)
			reaped += int(n)
			s.m.reaped.Add(float64(n))
			// The lobby's next visit: its earliest due room, or one lease
			// from now — no seat taken after this sweep expires sooner.
			due := nowMs + leaseMs
			if str, _ := v[2].(string); str != "" {
				if f, err := strconv.ParseFloat(str, 64); err == nil {
					due = min(due, int64(f))
				}
			}
			if visited >= sweepRooms {
				due = nowMs // more rooms are due: again in the next round
			}
			next = append(next, redis.Z{Score: float64(due), Member: lobby})
		}
		if err := s.rdb.ZAdd(ctx, lobbiesKey(s.ks), next...).Err(); err != nil {
			return reaped, fmt.Errorf("rooms: sweep: %w", err)
		}
		if len(lobbies) < sweepLobbies && !anyDue(next, nowMs) {
			return reaped, nil
		}
	}
	return reaped, nil
}

func anyDue(zs []redis.Z, nowMs int64) bool {
	for _, z := range zs {
		if int64(z.Score) <= nowMs {
			return true
		}
	}
	return false
}

// RunSweeper calls Sweep every interval (0 means one second) until ctx
// ends, logging and counting failures, and returns nil then. Run one per
// node; with many nodes each lobby is still swept about once per interval
// per node, and a sweep with nothing due costs one round trip.
func (s *Service) RunSweeper(ctx context.Context, every time.Duration) error {
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.m.sweepErrors.Inc()
			s.log.Warn("rooms: sweep failed", "err", err)
		}
	}
}
