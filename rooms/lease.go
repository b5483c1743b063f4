package rooms

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// Seats are leases held by attachments: each WebSocket connection or REST
// session of a user that is in a room is an attachment of the user's seat,
// with a lease of its own; the seat's score in its room's ZSET is the
// latest of its attachments' expiries. The node that holds an attachment
// renews it and detaches it when the connection ends (Detach): a REST
// session's with Renew, one by one; a WebSocket's, bound to the node's run
// (Attach.Run), with KeepRun, one run lease per lobby per tick. A node
// that stops renewing — killed, partitioned, paused — loses its
// attachments one lease later, and the seats only they held with them,
// when the seat script or the sweeper reaps them.

// Renew extends every attachment in atts, and the lease of the seat it
// holds, to now + the lease, in one pipelined round trip: one script per
// lobby, all of the lobby's attachments in its arguments. It never
// records an attachment: one that is not recorded (never attached,
// detached, reaped, expired, or its user's seat is gone or in another room)
// is returned in lost, and its seat — which may be held by another
// attachment, or by nobody — is neither extended nor freed. The caller
// should drop the lost attachments and tell their connections (or
// Reclaim). Call it for the node's attachments at least every third of the
// lease. A malformed room id, user or attachment id is returned as lost.
// It returns Redis errors wrapped; lost is then nil.
func (s *Seats) Renew(ctx context.Context, atts []Attachment) (lost []Attachment, err error) {
	return s.renew(ctx, "", atts)
}

// KeepRun keeps the attachments of atts, all of them the attachments run
// holds (bound with Attach.Run = run), in one pipelined round trip per
// tick whose cost does not grow with them: one script per lobby extends
// run's lease there, which keeps every attachment bound to run in the
// lobby alive (lua/run_keep.lua: a ZSCORE, a ZLEXCOUNT and a ZADD). A
// lobby where that cannot be done — run's lease ran out (a pause past the
// lease: its attachments were ended and their seats reaped), or Redis holds
// another number of run's attachments than atts (one lost, a join in
// flight, a detach that failed) — and each lobby once per third of the
// hold (RunHoldLeases leases) gets a second round trip: the attachments
// renewed one by one as by Renew, to the hold, which reports the lost ones
// and ends run's attachments there that atts no longer lists. Call it with
// all of run's attachments at least every third of the lease, from the node
// that holds them. A malformed attachment is returned as lost. It returns
// ErrBadAttachment for a bad run, and Redis errors wrapped; lost is then
// nil.
func (s *Seats) KeepRun(ctx context.Context, run string, atts []Attachment) (lost []Attachment, err error) {
	if err := checkRun(run); err != nil {
		return nil, fmt.Errorf("rooms: keep run: %w", err)
	}
	if len(atts) == 0 {
		return nil, nil
	}
	type lobbyAtts struct {
		lobby string
		atts  []Attachment
		cmd   *redis.Cmd
	}
	var keep []*lobbyAtts
	byLobby := map[string]*lobbyAtts{}
	var full []Attachment
	for _, a := range atts {
		lobby, _, err := ParseRoom(a.Room)
		if err != nil {
			full = append(full, a) // reported lost by renew
			continue
		}
		b := byLobby[lobby]
		if b == nil {
			b = &lobbyAtts{lobby: lobby}
			byLobby[lobby] = b
			keep = append(keep, b)
		}
		b.atts = append(b.atts, a)
	}
	now := s.now()
	every := s.holdDur() / 3
	light := keep[:0:0]
	for _, b := range keep {
		if s.fullRenew.due(now, run+"/"+b.lobby, every) {
			full = append(full, b.atts...)
		} else {
			light = append(light, b)
		}
	}
	if len(light) > 0 {
		err = redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
			for _, b := range light {
				// No ZADD NX of the lobby into the sweeper's index here, as
				// renew does: the full round, once per third of the hold and
				// whenever this script answers 0 (as it does on a Redis that
				// lost its data), adds it back, and once per tick per lobby
				// it was a fifth of an idle node's commands.
				b.cmd = p.Script(runKeepScript, s.lobbyKeys(b.lobby), append(s.lobbyArgs(b.lobby), run, len(b.atts))...)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("rooms: keep run %s in %d lobbies: %w", run, len(light), err)
		}
		for _, b := range light {
			n, err := b.cmd.Int()
			if err != nil {
				return nil, fmt.Errorf("rooms: keep run %s in %s: %w", run, b.lobby, err)
			}
			if n != 1 {
				full = append(full, b.atts...)
			}
		}
	}
	if len(full) == 0 {
		return nil, nil
	}
	return s.renew(ctx, run, full)
}

// renew renews atts one by one (lua/seat_renew.lua); with a run, atts
// are all of the run's attachments in their lobbies (KeepRun).
func (s *Seats) renew(ctx context.Context, run string, atts []Attachment) (lost []Attachment, err error) {
	if len(atts) == 0 {
		return nil, nil
	}
	type batch struct {
		lobby   string
		idx     []int // positions in atts
		rooms   []int // room numbers, whose histories go in KEYS
		inBatch map[int]bool
		triples []any
		keys    []string
		args    []any
		cmd     *redis.Cmd
	}
	var batches []*batch
	byLobby := map[string]*batch{}
	for i, a := range atts {
		lobby, seq, err := ParseRoom(a.Room)
		if err != nil || names.User(a.User) != nil || checkAttachID(a.ID) != nil {
			lost = append(lost, a)
			continue
		}
		b := byLobby[lobby]
		if b == nil {
			b = &batch{lobby: lobby, inBatch: map[int]bool{}}
			byLobby[lobby] = b
			batches = append(batches, b)
		}
		if !b.inBatch[seq] {
			b.inBatch[seq] = true
			b.rooms = append(b.rooms, seq)
		}
		b.idx = append(b.idx, i)
		b.triples = append(b.triples, seq, a.User, a.ID)
	}
	now := s.now()
	for _, b := range batches {
		// KEYS: the lobby's, then the histories of the rooms renewed whose
		// TTLs are due for a refresh (see lua/seat_renew.lua and
		// historiesDue).
		b.keys = s.lobbyKeys(b.lobby)
		due := s.historiesDue(now, b.lobby, b.rooms)
		b.args = append(s.lobbyArgs(b.lobby), run, ms(now.Add(s.holdDur())), len(due))
		for _, seq := range due {
			b.keys = append(b.keys, historyKey(s.ks, b.lobby, seq))
			b.args = append(b.args, seq)
		}
		b.args = append(b.args, b.triples...)
	}
	var healed []*redis.Cmd
	err = redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
		// The counts of the previous Renew ride along, repairing index
		// entries whose write failed; stamps make a count that old harmless.
		healed = s.lobbies.queueCounts(p)
		for _, b := range batches {
			b.cmd = p.Script(seatRenewScript, b.keys, b.args...)
			// Keep the lobby known to the sweeper, should its index entry be lost.
			p.ZAddNX(ctx, lobbiesKey(s.ks), redis.Z{Score: float64(now.UnixMilli()), Member: b.lobby})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("rooms: renew %d attachments: %w", len(atts), err)
	}
	s.lobbies.checkCounts(healed)
	var idle []string
	counts := make([]lobbyCount, 0, len(batches))
	for _, b := range batches {
		v, err := b.cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("rooms: renew attachments in %s: %w", b.lobby, err)
		}
		var gone []any
		ok := len(v) == 2 || len(v) == 6
		if ok {
			gone, ok = v[0].([]any)
		}
		if !ok {
			return nil, fmt.Errorf("rooms: renew attachments in %s: %w", b.lobby, errUnexpectedReply)
		}
		for _, g := range gone {
			if n, ok := g.(int64); ok && n >= 1 && int(n) <= len(b.idx) {
				lost = append(lost, atts[b.idx[n-1]])
			}
		}
		if v[1] == int64(1) {
			idle = append(idle, b.lobby)
		}
		if c, ok := countOf(b.lobby, v[2:]); ok {
			counts = append(counts, c)
		}
	}
	s.retire(ctx, idle...)
	s.lobbies.indexCounts(ctx, counts...) // reaped seats: at once
	s.lobbies.holdCounts(counts)          // all: with the next Renew
	return lost, nil
}

// historiesDue returns the rooms of lobby, among seqs, whose history TTL
// this node has not refreshed within IdleTTL/48 (30 minutes at the
// default 24 h), and marks them refreshed now. A history lives IdleTTL
// after its room's last renewal: refreshing it on every Renew (every 10 s
// by default) cost a PEXPIRE per room per tick for a TTL of a day.
func (s *Seats) historiesDue(now time.Time, lobby string, seqs []int) []int {
	every := s.idleTTL / 48
	var due []int
	for _, seq := range seqs {
		if s.hist.due(now, lobby+"/"+strconv.Itoa(seq), every) {
			due = append(due, seq)
		}
	}
	return due
}

// Sweep limits: lobbies per round trip, seats reaped per lobby per script run, and
// rounds per Sweep (the rest waits for the next one).
const (
	sweepLobbies = 128
	sweepSeats   = 1024
	sweepRounds  = 32
)

// Sweep reaps the expired seats of every lobby, with their attachments,
// publishing a "left" event for each, and returns how many it removed. It
// finds them cheaply: a global index scores each lobby with a lower bound
// of its earliest lease expiry, and each lobby's leases are one ZSET
// scored by expiry, so a sweep with nothing due is one ZRANGEBYSCORE. A lobby left
// without seats leaves the index (and its keys expire after
// Config.IdleTTL), so lobbies joined once are not swept forever; its next
// seat puts it back. Several nodes may sweep at once.
// It returns Redis errors wrapped, with the count reaped so far.
func (s *Seats) Sweep(ctx context.Context) (reaped int, err error) {
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
		keys := s.lobbyKeys
		args := func(lobby string) []any { return append(s.lobbyArgs(lobby), sweepSeats) }
		cmds := make([]*redis.Cmd, len(lobbies))
		err = redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
			for i, lobby := range lobbies {
				cmds[i] = p.Script(lobbySweepScript, keys(lobby), args(lobby)...)
			}
		})
		if err != nil {
			return reaped, fmt.Errorf("rooms: sweep %d lobbies: %w", len(lobbies), err)
		}
		next := make([]redis.Z, 0, len(lobbies))
		counts := make([]lobbyCount, 0, len(lobbies))
		var idle []string
		for i, lobby := range lobbies {
			v, err := cmds[i].Slice()
			if err != nil || (len(v) != 4 && len(v) != 8) {
				return reaped, fmt.Errorf("rooms: sweep %s: %w (reply %v)", lobby, err, v)
			}
			if c, ok := countOf(lobby, v[4:]); ok {
				// Seats reaped, or an idle lobby whose removal from the
				// index may have failed before.
				c.changed = c.changed || v[3] == int64(1)
				counts = append(counts, c)
			}
			n, _ := v[0].(int64)
			more := v[1] == int64(1)
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
			if more {
				due = nowMs // more seats are due: again in the next round
			}
			if v[3] == int64(1) && !more {
				idle = append(idle, lobby) // no seat left: out of the index
				continue
			}
			next = append(next, redis.Z{Score: float64(due), Member: lobby})
		}
		if len(next) > 0 {
			// XX: a lobby retired meanwhile (by a Leave) stays out.
			if err := s.rdb.ZAddXX(ctx, lobbiesKey(s.ks), next...).Err(); err != nil {
				return reaped, fmt.Errorf("rooms: sweep: %w", err)
			}
		}
		s.retire(ctx, idle...)
		s.lobbies.indexCounts(ctx, counts...)
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
func (s *Seats) RunSweeper(ctx context.Context, every time.Duration) error {
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
