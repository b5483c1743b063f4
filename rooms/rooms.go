package rooms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/names"
)

// Defaults of Config's zero values.
const (
	DefaultCapacity   = 50
	DefaultLease      = 30 * time.Second
	DefaultHistoryMax = 1000
	DefaultLockTTL    = 5 * time.Second
	DefaultIdleTTL    = 24 * time.Hour

	DefaultIdempotencyTTL = 10 * time.Minute
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
	// IdleTTL is how long every key of a lobby outlives its last seat (its
	// rooms, records, histories, counters): a lobby nobody comes back to is
	// forgotten then; one that gets a seat first keeps everything. 0 means
	// DefaultIdleTTL (24h).
	IdleTTL time.Duration
	// IdempotencyTTL is how long a say sent with an idempotency key
	// (SendRequest.Key) is remembered: a say with that key within it is
	// answered with the first one's message and not sent again. 0 means
	// DefaultIdempotencyTTL (10 minutes). Each keyed say costs about 150
	// bytes of Redis memory for that long.
	IdempotencyTTL time.Duration
	// MaxLobbiesPerUser returns the live limit.seats_per_user setting, read
	// on every Join and Reclaim of a lobby the user holds no seat in: the
	// most lobbies a user may hold seats in (ErrTooManyLobbies beyond);
	// nil or 0 means no cap. Seats taken while there was no cap are counted
	// from the user's next join or resume in their lobby on.
	MaxLobbiesPerUser func() int
	// ShardedPubSub publishes room events with SPUBLISH (Redis 7+) instead
	// of PUBLISH, for subscribers that SSUBSCRIBE on the shard owning the
	// room's lobby on Redis Cluster; false means PUBLISH.
	ShardedPubSub bool
	// Durability returns the live message.durability setting, read on
	// every Send and SendMany: DurabilityReplica ("replica") acks a message
	// only once a replica holds it (WAIT 1 in the send's pipeline; else
	// ErrNotReplicated); nil or any other value (the settings registry
	// allows only "none" besides) means DurabilityNone.
	Durability func() string
	// DurabilityTimeout is how long a send waits for a replica under
	// DurabilityReplica; 0 means DefaultDurabilityTimeout (1s). Keep it
	// below the client's ReadTimeout: WAIT blocks its connection that long.
	DurabilityTimeout time.Duration
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
	rdb               redis.UniversalClient
	ks                keyspace.Space
	lock              *lock.Client
	capacity          func() int
	lease             func() time.Duration
	historyMax        int
	lockTTL           time.Duration
	idleTTL           time.Duration
	idemTTL           time.Duration
	publish           string // PUBLISH or SPUBLISH
	durability        func() string
	maxLobbiesPerUser func() int
	waitFor           time.Duration // WAIT's timeout under DurabilityReplica
	now               func() time.Time
	log               *slog.Logger
	m                 *metrics

	qmu      sync.Mutex
	queues   map[string]*joinQueue // lobby → joins waiting for this node's drain
	maxBatch int                   // most joins per seat script call
	runCtx   context.Context       // the drains' context, from Start; nil when not started
	stop     context.CancelFunc    // cancels runCtx
	closing  bool                  // Close began: no new drain
	drains   sync.WaitGroup        // running drains

	heldMu sync.Mutex
	held   map[string]lobbyCount // lobby → count for the next Renew to index

	histMu    sync.Mutex
	histAt    map[string]time.Time // "lobby/seq" → when Renew last refreshed its history's TTL
	histSwept time.Time

	// beforeCreate, when set (tests), runs between taking the lobby's lock
	// and running the room-creation script.
	beforeCreate func(ctx context.Context, l *lock.Lock)
}

// New returns a Service keeping its data in rdb. It returns an error when
// cfg.Lock keeps its keys under another prefix than cfg.Prefix.
func New(rdb redis.UniversalClient, cfg Config) (*Service, error) {
	s := &Service{
		rdb:               rdb,
		ks:                keyspace.New(cfg.Prefix),
		lock:              cfg.Lock,
		capacity:          cfg.Capacity,
		lease:             cfg.Lease,
		historyMax:        cfg.HistoryMax,
		lockTTL:           cfg.LockTTL,
		idleTTL:           cfg.IdleTTL,
		idemTTL:           cfg.IdempotencyTTL,
		publish:           "PUBLISH",
		durability:        cfg.Durability,
		maxLobbiesPerUser: cfg.MaxLobbiesPerUser,
		waitFor:           cfg.DurabilityTimeout,
		now:               cfg.Now,
		log:               cfg.Logger,
		m:                 newMetrics(cfg.Registerer),
		queues:            map[string]*joinQueue{},
		maxBatch:          maxBatch,
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
	if s.idleTTL <= 0 {
		s.idleTTL = DefaultIdleTTL
	}
	if s.idemTTL <= 0 {
		s.idemTTL = DefaultIdempotencyTTL
	}
	if s.waitFor <= 0 {
		s.waitFor = DefaultDurabilityTimeout
	}
	if cfg.ShardedPubSub {
		s.publish = "SPUBLISH"
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	// room_create.lua checks the fence with the lobby's keys: same prefix,
	// same hash tag.
	if _, fence := s.lock.Keys(lockName("x")); !strings.HasPrefix(fence, s.ks.Key("lobby", "x")+":") {
		return nil, fmt.Errorf("rooms: the lock keeps its fence in %q, outside the lobby's unit %q: give it prefix %q",
			fence, s.ks.Key("lobby", "x"), s.ks.Prefix())
	}
	return s, nil
}

// fenceKey is the lobby lock's fence counter, kept by the lock package in
// the lobby's hash-tag unit.
func (s *Service) fenceKey(lobby string) string {
	_, fence := s.lock.Keys(lockName(lobby))
	return fence
}

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

// Room is a room of a lobby, as docs/PROTOCOL.md shows it.
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

// Reclaim seats user in one given room and records att as an attachment
// of the seat, in one script: the resume path, which takes a user's seat
// back after the lease ran out. A live seat there is kept (lease extended,
// att added or renewed). It returns ErrUnknownRoom, ErrRoomFull when the
// room has no free seat, ErrSeatedElsewhere when the user holds a live seat
// in another room of the lobby, ErrPrivateRoom for a private room the
// user is not a player of, ErrTooManyLobbies when a lobby the user
// holds no seat in would exceed Config.MaxLobbiesPerUser, ErrBadAttachment,
// names.ErrBadName, and Redis errors.
func (s *Service) Reclaim(ctx context.Context, roomID, user string, att Attach) (Room, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err == nil {
		err = att.check()
	}
	if err != nil {
		return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
	}
	resv, err := s.reserveLobby(ctx, user, lobby)
	if err != nil {
		return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
	}
	res, err := s.claim(ctx, lobby, strconv.Itoa(seq), []*joinReq{{user: user, att: att}})
	defer func() { s.settle(ctx, resv, err) }()
	switch {
	case err != nil:
	case res.codes[0] == -1:
		err = ErrUnknownRoom
	case res.codes[0] == -2:
		err = fmt.Errorf("%w (%s)", ErrSeatedElsewhere, makeRoomID(lobby, res.seqs[0]))
	case res.codes[0] == -4:
		err = ErrPrivateRoom
	case res.codes[0] == 0:
		err = ErrRoomFull
	default:
		return s.room(lobby, res.seqs[0], res.members[res.seqs[0]]), nil
	}
	return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
}

// Leave frees user's seat in the room at once, with every attachment of
// it, and publishes a "left" event: an explicit leave, whatever else holds
// the seat. It returns ErrNotSeated when the user holds no seat there,
// ErrUnknownRoom, names.ErrBadName, and Redis errors.
func (s *Service) Leave(ctx context.Context, roomID, user string) error {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err == nil {
		var v []int64
		v, err = s.runLobby(ctx, seatReleaseScript, lobby, user, seq).Int64Slice()
		switch {
		case err != nil:
		case len(v) != 2 && len(v) != 6:
			err = errUnexpectedReply
		case v[0] == -1:
			err = ErrUnknownRoom
		case v[0] == 0:
			err = ErrNotSeated
		default:
			if v[1] == 1 {
				s.retire(ctx, lobby)
			}
			if c, ok := countOfInts(lobby, v[2:]); ok {
				s.indexCounts(ctx, c)
			}
			return nil
		}
	}
	return fmt.Errorf("rooms: leave %s as %s: %w", roomID, user, err)
}

// Room returns the room with its live members, in one read-only script.
// It returns ErrUnknownRoom, names.ErrBadName, and Redis errors.
func (s *Service) Room(ctx context.Context, roomID string) (Room, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	v, err := redisx.Run(ctx, s.rdb, roomReadScript, s.roomReadKeys(lobby), seq, ms(s.now())).Slice()
	if err != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	members, ok, err := parseRoomRead(v)
	if err != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	if !ok {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, ErrUnknownRoom)
	}
	return s.room(lobby, seq, members), nil
}

// roomReadKeys are the KEYS of room_read.lua and lobby_rooms.lua.
func (s *Service) roomReadKeys(lobby string) []string {
	return []string{roomsKey(s.ks, lobby), membersKey(s.ks, lobby), leasesKey(s.ks, lobby)}
}

// parseRoomRead reads room_read.lua's reply: the live members, and false
// for a room that does not exist.
func parseRoomRead(v []any) (members []string, ok bool, err error) {
	if len(v) == 1 && v[0] == int64(0) {
		return nil, false, nil
	}
	if len(v) != 2 || v[0] != int64(1) {
		return nil, false, errUnexpectedReply
	}
	list, _ := v[1].([]any)
	members = make([]string, 0, len(list))
	for _, m := range list {
		str, _ := m.(string)
		members = append(members, str)
	}
	return members, true, nil
}

// Rooms returns every room of the lobby, lowest number first, with its live
// members; none for a lobby without rooms. It returns names.ErrBadName and
// Redis errors.
func (s *Service) Rooms(ctx context.Context, lobby string) ([]Room, error) {
	if err := names.Lobby(lobby); err != nil {
		return nil, fmt.Errorf("rooms: rooms of %s: %w", lobby, err)
	}
	v, err := redisx.Run(ctx, s.rdb, lobbyRoomsScript, s.roomReadKeys(lobby), ms(s.now())).Slice()
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
		out = append(out, s.room(lobby, seq, members))
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
	pipe := s.rdb.Pipeline()
	at := pipe.ZScore(ctx, membersKey(s.ks, lobby), user)
	exp := pipe.ZScore(ctx, leasesKey(s.ks, lobby), user)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("rooms: seated %s as %s: %w", roomID, user, err)
	}
	if at.Err() != nil || exp.Err() != nil || int(at.Val()) != seq {
		return false, nil
	}
	return int64(exp.Val()) > s.now().UnixMilli(), nil
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

// LobbyExists reports whether the lobby has any room (one EXISTS): the
// caller's test before a join that would create a lobby, which it may rate
// limit. It returns names.ErrBadName wrapped and Redis errors.
func (s *Service) LobbyExists(ctx context.Context, lobby string) (bool, error) {
	if err := names.Lobby(lobby); err != nil {
		return false, fmt.Errorf("rooms: lobby %s: %w", lobby, err)
	}
	n, err := s.rdb.Exists(ctx, roomsKey(s.ks, lobby)).Result()
	if err != nil {
		return false, fmt.Errorf("rooms: lobby %s: %w", lobby, err)
	}
	return n == 1, nil
}

// RoomMany returns the rooms of ids that exist, with their live members, in
// one pipelined round trip (a poll of a user seated in many rooms; one
// read-only script per room); unknown and malformed ids are left out. It
// returns Redis errors.
func (s *Service) RoomMany(ctx context.Context, ids []string) ([]Room, error) {
	type q struct {
		lobby string
		seq   int
		cmd   *redis.Cmd
	}
	now := ms(s.now())
	qs := make([]q, 0, len(ids))
	for _, id := range ids {
		if lobby, seq, err := ParseRoom(id); err == nil {
			qs = append(qs, q{lobby: lobby, seq: seq})
		}
	}
	if len(qs) == 0 {
		return nil, nil
	}
	err := redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
		for i := range qs {
			qs[i].cmd = p.Script(roomReadScript, s.roomReadKeys(qs[i].lobby), qs[i].seq, now)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("rooms: %d rooms: %w", len(qs), err)
	}
	out := make([]Room, 0, len(qs))
	for _, x := range qs {
		v, err := x.cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("rooms: %d rooms: %w", len(qs), err)
		}
		members, ok, err := parseRoomRead(v)
		if err != nil {
			return nil, fmt.Errorf("rooms: %d rooms: %w", len(qs), err)
		}
		if ok {
			out = append(out, s.room(x.lobby, x.seq, members))
		}
	}
	return out, nil
}
