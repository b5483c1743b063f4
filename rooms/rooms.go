package rooms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/names"
)

// Defaults of Config's zero values.
const (
	DefaultCapacity   = 50
	DefaultLease      = 30 * time.Second
	DefaultHistoryMax = 1000
	DefaultLockTTL    = 5 * time.Second
)

// Config configures a Service. The zero value is ready to use.
type Config struct {
	// Prefix is the key prefix; "" means keyspace.DefaultPrefix ("chatd").
	Prefix string
	// Capacity returns the live room.capacity setting, read on every join;
	// nil or a value below 1 means DefaultCapacity (50).
	Capacity func() int
	// Lease returns the live seat.lease_seconds setting, read on every join,
	// renewal and sweep; nil or a value below 1ms means DefaultLease (30s).
	Lease func() time.Duration
	// HistoryMax caps each room's history (XADD MAXLEN ~, so Redis keeps
	// this many or a few more); 0 means DefaultHistoryMax (1000).
	HistoryMax int
	// Lock guards room creation; nil means lock.New(rdb) with Prefix and
	// Registerer. Its prefix must be Prefix: the fence key is checked in the
	// lobby's hash-tag unit.
	Lock *lock.Client
	// LockTTL is how long a room creator holds the lobby's lock at most;
	// 0 means DefaultLockTTL (5s).
	LockTTL time.Duration
	// Now is the clock for seat leases and message times; nil means
	// time.Now. Nodes sharing a Redis must agree on the time to well within
	// a lease.
	Now func() time.Time
	// Logger receives RunSweeper's errors; nil means slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics; nil registers none. Services may
	// share a registry.
	Registerer prometheus.Registerer
}

// Service seats users in the rooms of lobbies and carries their messages.
// It is safe for concurrent use; make one per node and share it.
type Service struct {
	rdb        redis.UniversalClient
	ks         keyspace.Space
	lock       *lock.Client
	capacity   func() int
	lease      func() time.Duration
	historyMax int
	lockTTL    time.Duration
	now        func() time.Time
	log        *slog.Logger
	m          *metrics

	// beforeCreate, when set (tests), runs between taking the lobby's lock
	// and running the room-creation script.
	beforeCreate func(ctx context.Context, l *lock.Lock)
}

// New returns a Service keeping its data in rdb. It returns an error when
// cfg.Lock keeps its keys under another prefix than cfg.Prefix.
func New(rdb redis.UniversalClient, cfg Config) (*Service, error) {
	s := &Service{
		rdb:        rdb,
		ks:         keyspace.New(cfg.Prefix),
		lock:       cfg.Lock,
		capacity:   cfg.Capacity,
		lease:      cfg.Lease,
		historyMax: cfg.HistoryMax,
		lockTTL:    cfg.LockTTL,
		now:        cfg.Now,
		log:        cfg.Logger,
		m:          newMetrics(cfg.Registerer),
	}
	if s.lock == nil {
		s.lock = lock.New(rdb, lock.Config{Prefix: cfg.Prefix, Registerer: cfg.Registerer})
	}
	if s.historyMax <= 0 {
		s.historyMax = DefaultHistoryMax
	}
	if s.lockTTL <= 0 {
		s.lockTTL = DefaultLockTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if _, fence := s.lock.Keys(lockName("x")); fence != s.fenceKey("x") {
		return nil, fmt.Errorf("rooms: the lock keeps its fence in %q, not in the lobby's unit %q: give it prefix %q",
			fence, usersKey(s.ks, "x"), s.ks.Prefix())
	}
	return s, nil
}

func (s *Service) fenceKey(lobby string) string { return s.ks.Key("lobby", lobby, "fence") }

func (s *Service) capNow() int {
	if s.capacity != nil {
		if c := s.capacity(); c >= 1 {
			return c
		}
	}
	return DefaultCapacity
}

func (s *Service) leaseDur() time.Duration {
	if s.lease != nil {
		if d := s.lease(); d >= time.Millisecond {
			return d
		}
	}
	return DefaultLease
}

// Room is a room of a lobby, as PROTOCOL.md shows it.
type Room struct {
	// ID is "{lobby}-{seq}".
	ID string `json:"id"`
	// Lobby is the lobby the room belongs to.
	Lobby string `json:"lobby"`
	// Seq is the room's number in its lobby, from 1; never reused.
	Seq int `json:"seq"`
	// Capacity is the current room.capacity (a room filled under a higher
	// one may hold more members).
	Capacity int `json:"capacity"`
	// Members are the users holding a live seat, sorted; never nil.
	Members []string `json:"members"`
}

// Seat is one user's seat in one room.
type Seat struct {
	Room string // room id "{lobby}-{seq}"
	User string
}

// ParseRoom splits a room id "{lobby}-{seq}" into its lobby and number. It
// returns an error wrapping names.ErrBadName for anything else.
func ParseRoom(roomID string) (lobby string, seq int, err error) {
	if err := names.Room(roomID); err != nil {
		return "", 0, err
	}
	i := strings.LastIndexByte(roomID, '-')
	seq, err = strconv.Atoi(roomID[i+1:])
	if err != nil {
		return "", 0, fmt.Errorf("%w: room %q: %v", names.ErrBadName, roomID, err)
	}
	return roomID[:i], seq, nil
}

func makeRoomID(lobby string, seq int) string { return lobby + "-" + strconv.Itoa(seq) }

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// Join seats user in lobby: in the lowest-numbered room with a free seat,
// or in a new room when every room is full. A user who already holds a live
// seat in the lobby gets the same room back (a reconnect, a second tab, a
// retry), with the lease extended.
//
// The seat claim is one script that checks the count against the live
// capacity and adds the seat, so no room ever goes over capacity. Only when
// every room is full does Join take the lobby's lock (lock.TryAcquire; on
// contention it backs off and tries the seat claim again), and run the
// creation script, which checks the lock's fence, looks for a free seat once
// more and only then creates room seq = INCR and seats the user, all at once.
//
// Join returns an error wrapping names.ErrBadName for a bad lobby or user
// name, ErrBusy when no room could be created within twice the lock TTL,
// and Redis errors (Redis down or full) as they come: nothing is then half
// created.
func (s *Service) Join(ctx context.Context, lobby, user string) (Room, error) {
	start := time.Now()
	r, how, err := s.join(ctx, lobby, user)
	if err != nil {
		s.m.failed.Inc()
		return Room{}, fmt.Errorf("rooms: join %s as %s: %w", lobby, user, err)
	}
	how.Inc()
	s.m.joinSeconds.Observe(time.Since(start).Seconds())
	return r, nil
}

func (s *Service) join(ctx context.Context, lobby, user string) (Room, prometheus.Counter, error) {
	if err := names.Lobby(lobby); err != nil {
		return Room{}, nil, err
	}
	if err := names.User(user); err != nil {
		return Room{}, nil, err
	}
	deadline := time.Now().Add(2 * s.lockTTL)
	pause := time.Millisecond
	for {
		res, err := s.claim(ctx, lobby, user, "")
		if err != nil {
			return Room{}, nil, err
		}
		switch res.status {
		case 2:
			return s.room(lobby, res), s.m.rejoined, nil
		case 1:
			return s.room(lobby, res), s.m.seated, nil
		}
		res, err = s.create(ctx, lobby, user)
		switch {
		case err == nil && res.status == 3:
			return s.room(lobby, res), s.m.created, nil
		case err == nil && res.status == 2:
			return s.room(lobby, res), s.m.rejoined, nil
		case err == nil:
			return s.room(lobby, res), s.m.seated, nil
		case errors.Is(err, lock.ErrFenceStale):
			s.m.fenceRejected.Inc()
		case !errors.Is(err, lock.ErrNotObtained):
			return Room{}, nil, err
		}
		// Another node is creating a room (or just did): try the seat
		// claim again after a short jittered pause.
		if time.Now().After(deadline) {
			return Room{}, nil, ErrBusy
		}
		t := time.NewTimer(pause/2 + rand.N(pause/2+1))
		select {
		case <-ctx.Done():
			t.Stop()
			return Room{}, nil, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// seatResult is a seat script's reply.
type seatResult struct {
	status  int64
	seq     int
	members []string
}

func parseSeat(v any) (seatResult, error) {
	a, ok := v.([]any)
	if !ok || len(a) == 0 {
		return seatResult{}, fmt.Errorf("unexpected script reply %v", v)
	}
	var r seatResult
	if r.status, ok = a[0].(int64); !ok {
		return seatResult{}, fmt.Errorf("unexpected script reply %v", v)
	}
	if len(a) > 1 {
		str, _ := a[1].(string)
		n, err := strconv.Atoi(str)
		if err != nil {
			return seatResult{}, fmt.Errorf("unexpected room number in script reply %v", v)
		}
		r.seq = n
	}
	for _, m := range a[min(2, len(a)):] {
		str, _ := m.(string)
		r.members = append(r.members, str)
	}
	return r, nil
}

func (s *Service) room(lobby string, r seatResult) Room {
	members := r.members
	if members == nil {
		members = []string{}
	}
	slices.Sort(members)
	return Room{ID: makeRoomID(lobby, r.seq), Lobby: lobby, Seq: r.seq, Capacity: s.capNow(), Members: members}
}

// seatKeys are KEYS[1..6] of seat_claim.lua and room_create.lua.
func (s *Service) seatKeys(lobby string) []string {
	return []string{
		usersKey(s.ks, lobby), roomsKey(s.ks, lobby), openKey(s.ks, lobby),
		openCapKey(s.ks, lobby), dueKey(s.ks, lobby), seatsPrefix(s.ks, lobby),
	}
}

// seatArgs are ARGV[1..6] of seat_claim.lua and room_create.lua.
func (s *Service) seatArgs(lobby, user string) []any {
	now := s.now()
	return []any{user, ms(now), ms(now.Add(s.leaseDur())), s.capNow(), lobby, channelPrefix(s.ks, lobby)}
}

// claim runs seat_claim.lua: target "" for the lowest room with a free seat.
func (s *Service) claim(ctx context.Context, lobby, user, target string) (seatResult, error) {
	v, err := seatClaimScript.Run(ctx, s.rdb, s.seatKeys(lobby), append(s.seatArgs(lobby, user), target)...).Result()
	if err != nil {
		return seatResult{}, err
	}
	return parseSeat(v)
}

// create takes the lobby's lock and runs room_create.lua with its fence. It
// returns lock.ErrNotObtained when another node holds the lock and
// lock.ErrFenceStale when the fence had moved on by the time the script ran.
func (s *Service) create(ctx context.Context, lobby, user string) (seatResult, error) {
	l, err := s.lock.TryAcquire(ctx, lockName(lobby), s.lockTTL)
	if err != nil {
		return seatResult{}, err
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
	keys := append(s.seatKeys(lobby), s.fenceKey(lobby), seqKey(s.ks, lobby), recordPrefix(s.ks, lobby))
	args := append(s.seatArgs(lobby, user), strconv.FormatInt(l.Fence(), 10))

	pipe := s.rdb.Pipeline()
	cmd := roomCreateScript.EvalSha(ctx, pipe, keys, args...)
	// Registering the lobby for the sweeper costs nothing in the same round
	// trip; score now, so the next sweep sets its real due time.
	reg := pipe.ZAddNX(ctx, lobbiesKey(s.ks), redis.Z{Score: float64(s.now().UnixMilli()), Member: lobby})
	_, _ = pipe.Exec(ctx) // errors are read per command below
	if isNoScript(cmd.Err()) {
		cmd = roomCreateScript.Run(ctx, s.rdb, keys, args...)
	}
	v, err := cmd.Result()
	if err != nil {
		return seatResult{}, err
	}
	r, err := parseSeat(v)
	if err != nil {
		return seatResult{}, err
	}
	if r.status == -3 {
		return seatResult{}, fmt.Errorf("create a room in %s with fence %d: %w", lobby, l.Fence(), lock.ErrFenceStale)
	}
	if r.status == 3 {
		if err := s.rdb.Incr(ctx, roomsTotalKey(s.ks)).Err(); err != nil {
			s.m.counterErrors.Inc()
		}
	}
	if reg.Err() != nil {
		s.m.counterErrors.Inc() // the next Renew in this lobby registers it
	}
	return r, nil
}

// Reclaim seats user in one given room: the resume path, which takes a
// user's seat back after the lease ran out. A live seat there is kept (lease
// extended). It returns ErrUnknownRoom, ErrRoomFull when the room has no
// free seat, ErrSeatedElsewhere when the user holds a live seat in another
// room of the lobby, names.ErrBadName, and Redis errors.
func (s *Service) Reclaim(ctx context.Context, roomID, user string) (Room, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err != nil {
		return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
	}
	res, err := s.claim(ctx, lobby, user, strconv.Itoa(seq))
	switch {
	case err != nil:
	case res.status == -1:
		err = ErrUnknownRoom
	case res.status == -2:
		err = fmt.Errorf("%w (%s)", ErrSeatedElsewhere, makeRoomID(lobby, res.seq))
	case res.status == 0:
		err = ErrRoomFull
	default:
		return s.room(lobby, res), nil
	}
	return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
}

// Leave frees user's seat in the room at once and publishes a "left"
// event. It returns ErrNotSeated when the user holds no seat there,
// ErrUnknownRoom, names.ErrBadName, and Redis errors.
func (s *Service) Leave(ctx context.Context, roomID, user string) error {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err == nil {
		keys := []string{usersKey(s.ks, lobby), roomsKey(s.ks, lobby), openKey(s.ks, lobby), seatsKey(s.ks, lobby, seq)}
		var n int64
		n, err = seatReleaseScript.Run(ctx, s.rdb, keys, user, seq, lobby, channelPrefix(s.ks, lobby)).Int64()
		switch {
		case err != nil:
		case n == -1:
			err = ErrUnknownRoom
		case n == 0:
			err = ErrNotSeated
		default:
			return nil
		}
	}
	return fmt.Errorf("rooms: leave %s as %s: %w", roomID, user, err)
}

// Room returns the room with its live members. It returns ErrUnknownRoom,
// names.ErrBadName, and Redis errors.
func (s *Service) Room(ctx context.Context, roomID string) (Room, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	pipe := s.rdb.Pipeline()
	exists := pipe.ZScore(ctx, roomsKey(s.ks, lobby), strconv.Itoa(seq))
	members := pipe.ZRangeByScore(ctx, seatsKey(s.ks, lobby, seq), &redis.ZRangeBy{Min: "(" + ms(s.now()), Max: "+inf"})
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	if exists.Err() != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, ErrUnknownRoom)
	}
	return s.room(lobby, seatResult{seq: seq, members: members.Val()}), nil
}

// Rooms returns every room of the lobby, lowest number first, with its live
// members; none for a lobby without rooms. It returns names.ErrBadName and
// Redis errors.
func (s *Service) Rooms(ctx context.Context, lobby string) ([]Room, error) {
	if err := names.Lobby(lobby); err != nil {
		return nil, fmt.Errorf("rooms: rooms of %s: %w", lobby, err)
	}
	v, err := lobbyRoomsScript.Run(ctx, s.rdb, []string{roomsKey(s.ks, lobby), seatsPrefix(s.ks, lobby)}, ms(s.now())).Slice()
	if err != nil {
		return nil, fmt.Errorf("rooms: rooms of %s: %w", lobby, err)
	}
	out := make([]Room, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		str, _ := v[i].(string)
		seq, err := strconv.Atoi(str)
		if err != nil {
			return nil, fmt.Errorf("rooms: rooms of %s: unexpected room number %v", lobby, v[i])
		}
		var members []string
		list, _ := v[i+1].([]any)
		for _, m := range list {
			str, _ := m.(string)
			members = append(members, str)
		}
		out = append(out, s.room(lobby, seatResult{seq: seq, members: members}))
	}
	return out, nil
}

// Seated reports whether user holds a live seat in the room (false for an
// unknown room). It returns names.ErrBadName and Redis errors.
func (s *Service) Seated(ctx context.Context, roomID, user string) (bool, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err != nil {
		return false, fmt.Errorf("rooms: seated %s as %s: %w", roomID, user, err)
	}
	exp, err := s.rdb.ZScore(ctx, seatsKey(s.ks, lobby, seq), user).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("rooms: seated %s as %s: %w", roomID, user, err)
	}
	return int64(exp) > s.now().UnixMilli(), nil
}

// Channel returns the room's pub/sub channel, on which the seat and message
// scripts publish Events; "" for a malformed room id.
func (s *Service) Channel(roomID string) string {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return ""
	}
	return channel(s.ks, lobby, seq)
}
