package rooms

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/names"
)

// maxBatch is the most joins one seat script call carries
// (joinQueues.maxBatch; tests lower it).
const maxBatch = 256

// Join seats user in lobby: in the lowest-numbered room with a free seat,
// or in a new room when every room is full, and records att as an
// attachment of the seat in the same script. A user who already holds a
// live seat in the lobby gets the same room back (a reconnect, a second
// tab, a REST session next to a WebSocket, a retry), with the lease
// extended and att added (or renewed, when its id is already there).
//
// The seat claim is one script that checks the count against the live
// capacity and adds the seat, so no room ever goes over capacity. Only when
// every room is full does the node take the lobby's lock (lock.TryAcquire;
// on contention it backs off and tries the seat claim again) and run the
// creation script, which checks the lock's fence, looks for a free seat once
// more and only then creates room seq = INCR and seats the user, all at once.
//
// A join with no other join of its lobby in progress on this node runs
// inline. Once the Seats are started (Start), joins that arrive while one
// is in progress are queued and seated together by the next script call
// (group commit, in arrival order), by a drain the Seats run under their
// run context, so a join storm costs a few script calls rather than one
// each, and each node has at most one contender for the lobby's lock.
// Before Start and from Close on, every join runs inline.
//
// Join returns an error wrapping names.ErrBadName for a bad lobby or user
// name, ErrBadAttachment for a bad attachment id, ErrTooManyLobbies when a
// lobby the user holds no seat in would exceed Config.MaxLobbiesPerUser,
// ErrBusy when no room could be created within twice the lock TTL,
// the context's error, and Redis errors (Redis down or full) as they come:
// nothing is then half created. A join whose context ended may still have
// been seated; its lease runs out unless renewed.
func (s *Seats) Join(ctx context.Context, lobby, user string, att Attach) (Room, error) {
	start := time.Now()
	r, how, err := s.join(ctx, lobby, user, att)
	if err != nil {
		s.m.failed.Inc()
		return Room{}, fmt.Errorf("rooms: join %s as %s: %w", lobby, user, err)
	}
	how.Inc()
	s.m.joinSeconds.Observe(time.Since(start).Seconds())
	return r, nil
}

// joinReq is one Join waiting in its lobby's queue.
type joinReq struct {
	user string
	att  Attach
	done chan joinRes // buffered: the drain never blocks on it
	gone atomic.Bool  // the caller stopped waiting
}

type joinRes struct {
	room Room
	how  prometheus.Counter
	err  error
}

// joinQueue holds the joins waiting for a lobby on this node while another
// join of it is being seated. It exists (in joinQueues.queues) exactly
// while some goroutine is seating joins of the lobby.
type joinQueue struct {
	pending []*joinReq
}

// joinQueues is the group commit of joins on this node (see the package
// doc, "atomic seat claims"): the joins of a lobby that arrive while one
// is being seated wait in its joinQueue, and a drain seats them together.
// The drains run under the run context Start gives (Seats.Start,
// Seats.Close); before Start and from Close on, every join seats itself.
type joinQueues struct {
	seat func(ctx context.Context, lobby string, batch []*joinReq) // Seats.seatBatch

	mu       sync.Mutex
	queues   map[string]*joinQueue // lobby → joins waiting for this node's drain
	maxBatch int                   // most joins per seat script call
	runCtx   context.Context       // the drains' context, from start; nil when not started
	stop     context.CancelFunc    // cancels runCtx
	closing  bool                  // close began: no new drain
	drains   sync.WaitGroup        // running drains
}

func (s *Seats) join(ctx context.Context, lobby, user string, att Attach) (Room, prometheus.Counter, error) {
	if err := names.Lobby(lobby); err != nil {
		return Room{}, nil, err
	}
	if err := names.User(user); err != nil {
		return Room{}, nil, err
	}
	if err := att.check(); err != nil {
		return Room{}, nil, err
	}
	resv, err := s.cap.reserve(ctx, user, lobby)
	if err != nil {
		return Room{}, nil, err
	}
	room, how, err := s.joins.enqueue(ctx, lobby, user, att)
	s.cap.settle(ctx, resv, err)
	return room, how, err
}

// enqueue seats one join: inline when no other join of its lobby is in
// progress on this node, else through the lobby's queue.
func (j *joinQueues) enqueue(ctx context.Context, lobby, user string, att Attach) (Room, prometheus.Counter, error) {
	req := &joinReq{user: user, att: att, done: make(chan joinRes, 1)}
	j.mu.Lock()
	if j.runCtx == nil || j.closing {
		// Not started, or closing: no background drain may run, so every
		// join seats itself.
		j.mu.Unlock()
		j.seat(ctx, lobby, []*joinReq{req})
		res := <-req.done
		return res.room, res.how, res.err
	}
	q := j.queues[lobby]
	if q == nil {
		// Nobody on this node is seating in this lobby: seat this join
		// inline, then hand whatever queued meanwhile to a drain.
		q = &joinQueue{}
		j.queues[lobby] = q
		j.mu.Unlock()
		j.seat(ctx, lobby, []*joinReq{req})
		j.mu.Lock()
		switch {
		case len(q.pending) == 0:
			delete(j.queues, lobby)
			j.mu.Unlock()
		case !j.closing:
			// The drain serves other callers: it runs under the Seats' run
			// context, not this caller's; each batch has its own
			// deadline.
			j.drains.Add(1)
			run := j.runCtx
			j.mu.Unlock()
			go func() {
				defer j.drains.Done()
				j.drain(run, lobby, q)
			}()
		default:
			// Close began meanwhile: no new drain; this caller seats the
			// joins that queued behind it before it returns.
			j.mu.Unlock()
			j.drain(context.WithoutCancel(ctx), lobby, q)
		}
		res := <-req.done
		return res.room, res.how, res.err
	}
	q.pending = append(q.pending, req)
	j.mu.Unlock()
	select {
	case res := <-req.done:
		return res.room, res.how, res.err
	case <-ctx.Done():
		req.gone.Store(true)
		return Room{}, nil, ctx.Err()
	}
}

// drain seats the lobby's queued joins, a batch at a time, until none wait.
func (j *joinQueues) drain(ctx context.Context, lobby string, q *joinQueue) {
	for {
		j.mu.Lock()
		var batch []*joinReq
		n := 0
		for _, r := range q.pending {
			if r.gone.Load() {
				n++
				continue
			}
			if len(batch) == j.maxBatch {
				break
			}
			batch = append(batch, r)
			n++
		}
		q.pending = q.pending[n:]
		if len(batch) == 0 {
			delete(j.queues, lobby)
			j.mu.Unlock()
			return
		}
		j.mu.Unlock()
		j.seat(ctx, lobby, batch)
	}
}

// seatBatch seats a batch of joins: the seat claim for all, then, for those
// that found every room full, room creation under the lobby's lock.
func (s *Seats) seatBatch(ctx context.Context, lobby string, batch []*joinReq) {
	ctx, cancel := context.WithTimeout(ctx, 2*s.lockTTL+5*time.Second)
	defer cancel()
	deadline := time.Now().Add(2 * s.lockTTL)
	pause := time.Millisecond
	fail := func(err error) {
		for _, r := range batch {
			r.done <- joinRes{err: err}
		}
	}
	for {
		res, err := s.claim(ctx, lobby, "", batch)
		if err != nil {
			fail(err)
			return
		}
		batch = s.deliver(lobby, batch, res)
		if len(batch) == 0 {
			return
		}
		res, err = s.create(ctx, lobby, batch)
		switch {
		case err == nil:
			s.deliver(lobby, batch, res)
			return
		case errors.Is(err, lock.ErrFenceStale):
			// We held the lock past its TTL (a pause) and another node has
			// created a room meanwhile: claim again, with a fresh budget,
			// since the time we were paused was not spent waiting.
			s.m.fenceRejected.Inc()
			deadline = time.Now().Add(2 * s.lockTTL)
			continue
		case !errors.Is(err, lock.ErrNotObtained):
			fail(err)
			return
		}
		// Another node is creating a room (or just did): try the seat
		// claim again after a short jittered pause.
		if time.Now().After(deadline) {
			fail(ErrBusy)
			return
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			fail(ctx.Err())
			return
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
		batch = slices.DeleteFunc(batch, func(r *joinReq) bool { return r.gone.Load() })
		if len(batch) == 0 {
			return
		}
	}
}

// deliver answers the joins of batch that res seated and returns the others.
func (s *Seats) deliver(lobby string, batch []*joinReq, res batchResult) (rest []*joinReq) {
	for i, r := range batch {
		var how prometheus.Counter
		switch res.codes[i] {
		case 3:
			how = s.m.created
		case 2:
			how = s.m.rejoined
		case 1:
			how = s.m.seated
		case -4:
			r.done <- joinRes{err: ErrPrivateRoom}
			continue
		default:
			rest = append(rest, r)
			continue
		}
		seq := res.seqs[i]
		r.done <- joinRes{room: s.room(lobby, seq, slices.Clone(res.members[seq])), how: how}
	}
	return rest
}

var errUnexpectedReply = errors.New("rooms: unexpected seat script reply")

// batchResult is a seat script's reply: a code and a room number (0 for
// none) per user, the live members of each of those rooms, and whether the
// lobby got its first seat (woke) or has none left (idle).
type batchResult struct {
	codes      []int64
	seqs       []int
	members    map[int][]string
	woke, idle bool
	count      lobbyCount // the lobby's count, when counted
	counted    bool
}

func parseBatch(v any, n int) (batchResult, error) {
	bad := errUnexpectedReply
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return batchResult{}, bad
	}
	flags, _ := a[3].([]any)
	if len(flags) != 2 && len(flags) != 6 {
		return batchResult{}, bad
	}
	codes, _ := a[0].([]any)
	seqs, _ := a[1].([]any)
	rooms, _ := a[2].([]any)
	if len(codes) != len(seqs) || (len(codes) != n && len(codes) != 1) {
		return batchResult{}, bad
	}
	r := batchResult{codes: make([]int64, len(codes)), seqs: make([]int, len(codes)), members: map[int][]string{},
		woke: flags[0] == int64(1), idle: flags[1] == int64(1)}
	r.count, r.counted = countOf("", flags[2:])
	for i := range codes {
		if r.codes[i], ok = codes[i].(int64); !ok {
			return batchResult{}, bad
		}
		if str, _ := seqs[i].(string); str != "" {
			seq, err := strconv.Atoi(str)
			if err != nil {
				return batchResult{}, bad
			}
			r.seqs[i] = seq
		}
	}
	for i := 0; i+1 < len(rooms); i += 2 {
		str, _ := rooms[i].(string)
		seq, err := strconv.Atoi(str)
		if err != nil {
			return batchResult{}, bad
		}
		list, _ := rooms[i+1].([]any)
		members := make([]string, 0, len(list))
		for _, m := range list {
			str, _ := m.(string)
			members = append(members, str)
		}
		slices.Sort(members)
		r.members[seq] = members
	}
	return r, nil
}

func (b *base) room(lobby string, seq int, members []string) Room {
	if members == nil {
		members = []string{}
	}
	slices.Sort(members)
	return Room{ID: makeRoomID(lobby, seq), Lobby: lobby, Seq: seq, Capacity: b.capNow(), Members: members}
}

// appendTriples appends the (user, attachment id, kind) triple of each
// join to a seat script's ARGV.
func (s *Seats) appendTriples(args []any, batch []*joinReq) []any {
	hold := s.now().Add(s.holdDur())
	for _, r := range batch {
		args = append(args, r.user, r.att.ID, r.att.kind(hold))
	}
	return args
}

// claim runs seat_claim.lua: target "" to seat each join's user in the
// lowest room with a free seat, else the one join's user in room target;
// each seated join's attachment is recorded.
func (s *Seats) claim(ctx context.Context, lobby, target string, batch []*joinReq) (batchResult, error) {
	args := s.appendTriples(append(s.lobbyArgs(lobby), target), batch)
	v, err := redisx.Run(ctx, s.rdb, seatClaimScript, s.lobbyKeys(lobby), args...).Result()
	if err != nil {
		return batchResult{}, err
	}
	r, err := parseBatch(v, len(batch))
	if err == nil {
		s.indexed(ctx, lobby, r)
	}
	return r, err
}

// indexed keeps the sweeper's index and the lobby index in step with what
// a seat script did.
func (s *Seats) indexed(ctx context.Context, lobby string, r batchResult) {
	switch {
	case r.idle:
		s.retire(ctx, lobby)
	case r.woke:
		s.register(ctx, lobby)
	}
	if r.counted {
		r.count.lobby = lobby
		s.lobbies.indexCounts(ctx, r.count)
	}
}

// create takes the lobby's lock and runs room_create.lua with its fence,
// seating every join's user and recording its attachment. It returns lock.ErrNotObtained when another node
// holds the lock and lock.ErrFenceStale when the fence had moved on by the
// time the script ran.
func (s *Seats) create(ctx context.Context, lobby string, batch []*joinReq) (batchResult, error) {
	l, err := s.lock.TryAcquire(ctx, lockName(lobby), s.lockTTL)
	if err != nil {
		return batchResult{}, err
	}
	held := time.Now()
	defer func() {
		// Release even when ctx ended: otherwise the lobby waits out the TTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = l.Release(rctx) // a lock lost meanwhile is what the fence is for
		s.m.lockHold.Observe(time.Since(held).Seconds())
	}()
	if s.beforeCreate != nil {
		s.beforeCreate(ctx, l)
	}
	args := s.appendTriples(append(s.lobbyArgs(lobby), strconv.FormatInt(l.Fence(), 10)), batch)
	v, err := redisx.Run(ctx, s.rdb, roomCreateScript, s.lobbyKeys(lobby), args...).Result()
	if err != nil {
		return batchResult{}, err
	}
	r, err := parseBatch(v, len(batch))
	if err != nil {
		return batchResult{}, err
	}
	if r.codes[0] == -3 {
		return batchResult{}, fmt.Errorf("create a room in %s with fence %d: %w", lobby, l.Fence(), lock.ErrFenceStale)
	}
	s.indexed(ctx, lobby, r)
	var created int64
	for _, c := range r.codes {
		if c == 3 {
			created++
		}
	}
	if created > 0 {
		if err := countRooms(ctx, s.rdb, s.ks, created); err != nil {
			s.m.counterErrors.Inc()
		}
	}
	return r, nil
}

// countRooms adds n rooms created to the global counter (roomsTotalKey),
// once: the call carries a token of its own (counter_add.lua), so
// go-redis's retry of a late call does not count them twice, and it ends
// within redisx.CallBound, while the token is kept.
func countRooms(ctx context.Context, rdb redis.Scripter, ks keyspace.Space, n int64) error {
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	keys := []string{roomsTotalKey(ks), roomsCountedKey(ks, redisx.CallID())}
	return redisx.Run(ctx, rdb, counterAddScript, keys, n, countedTTL.Milliseconds()).Err()
}
