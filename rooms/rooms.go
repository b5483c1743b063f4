package rooms

import (
	"fmt"
	"log/slog"
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
	// SendWindow is the shortest time between the starts of two send
	// commits of this node (SendMany's group commit): a commit that would
	// start sooner waits out the rest of it, and carries the says that
	// came meanwhile, unless a full script call's (64) are waiting. A busy
	// node then sends fewer, fuller script calls, which costs Redis less
	// per say, at the price of up to the window's latency on a say; a
	// node whose last commit started a window ago sends at once. 0 means
	// none: a commit starts as soon as the last one has answered.
	SendWindow time.Duration
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

// Service holds the package's parts, built together by New over one Redis
// client and one Config; each part is safe for concurrent use: make one
// Service per node and share its parts. The parts are separate types, each owning its keys
// and scripts (keys.go, scripts.go say which), so that a caller depends on
// the part it uses:
//
//   - Seats seats users in rooms and keeps their seats alive: joins,
//     resumes, attachments, leases, the sweeper, the per-user seat cap,
//     lock-guarded room creation, and the reads of who sits where.
//   - Messages stores and publishes what is said in a room: says
//     (idempotent, rate limited, durable on request), history, removal,
//     typing, the room's channel and the global counters.
//   - Lobbies lists the lobbies with seated users, from an index the seat
//     scripts' callers keep.
//   - ReadMarks keeps each user's last-read message per room and counts
//     what is unread.
//   - Private makes the private room of a fixed set of users (a match).
type Service struct {
	Seats     *Seats
	Messages  *Messages
	Lobbies   *Lobbies
	ReadMarks *ReadMarks
	Private   *Private
}

// base is what every part shares: the Redis client, the key space, the
// clock, the metrics, and the settings that the seat scripts' common
// arguments carry (lobbyKeys, lobbyArgs).
type base struct {
	rdb      redis.UniversalClient
	ks       keyspace.Space
	lock     *lock.Client // its fence is in every seat script's KEYS
	capacity func() int
	lease    func() time.Duration
	idleTTL  time.Duration
	publish  string // PUBLISH or SPUBLISH
	cluster  bool   // rdb is a Redis Cluster client: a script's keys share a slot
	now      func() time.Time
	log      *slog.Logger
	m        *metrics
}

// New returns a Service keeping its data in rdb. It returns an error when
// cfg.Lock keeps its keys under another prefix than cfg.Prefix.
func New(rdb redis.UniversalClient, cfg Config) (*Service, error) {
	b := &base{
		rdb:      rdb,
		ks:       keyspace.New(cfg.Prefix),
		lock:     cfg.Lock,
		capacity: cfg.Capacity,
		lease:    cfg.Lease,
		idleTTL:  cfg.IdleTTL,
		publish:  "PUBLISH",
		now:      cfg.Now,
		log:      cfg.Logger,
		m:        newMetrics(cfg.Registerer),
	}
	if b.lock == nil {
		b.lock = lock.New(rdb, lock.Config{Prefix: cfg.Prefix, Registerer: cfg.Registerer})
	}
	if b.idleTTL <= 0 {
		b.idleTTL = DefaultIdleTTL
	}
	if cfg.ShardedPubSub {
		b.publish = "SPUBLISH"
	}
	_, b.cluster = rdb.(*redis.ClusterClient)
	if b.now == nil {
		b.now = time.Now
	}
	if b.log == nil {
		b.log = slog.Default()
	}
	// room_create.lua checks the fence with the lobby's keys: same prefix,
	// same hash tag.
	if _, fence := b.lock.Keys(lockName("x")); !strings.HasPrefix(fence, b.ks.Key("lobby", "x")+":") {
		return nil, fmt.Errorf("rooms: the lock keeps its fence in %q, outside the lobby's unit %q: give it prefix %q",
			fence, b.ks.Key("lobby", "x"), b.ks.Prefix())
	}
	lockTTL := cfg.LockTTL
	if lockTTL <= 0 {
		lockTTL = DefaultLockTTL
	}
	lobbies := &Lobbies{base: b}
	seats := &Seats{base: b, lobbies: lobbies, lockTTL: lockTTL,
		cap: &seatCap{base: b, limit: cfg.MaxLobbiesPerUser, pending: reservePending(lockTTL)}}
	seats.joins = &joinQueues{queues: map[string]*joinQueue{}, maxBatch: maxBatch, seat: seats.seatBatch}
	msgs := &Messages{base: b, historyMax: cfg.HistoryMax, idemTTL: cfg.IdempotencyTTL,
		durability: cfg.Durability, waitFor: cfg.DurabilityTimeout}
	if msgs.historyMax <= 0 {
		msgs.historyMax = DefaultHistoryMax
	}
	if msgs.idemTTL <= 0 {
		msgs.idemTTL = DefaultIdempotencyTTL
	}
	if msgs.waitFor <= 0 {
		msgs.waitFor = DefaultDurabilityTimeout
	}
	msgs.q.window, msgs.q.sleep = cfg.SendWindow, time.Sleep
	return &Service{
		Seats:     seats,
		Messages:  msgs,
		Lobbies:   lobbies,
		ReadMarks: &ReadMarks{base: b},
		Private:   &Private{base: b, seats: seats},
	}, nil
}

// fenceKey is the lobby lock's fence counter, kept by the lock package in
// the lobby's hash-tag unit.
func (b *base) fenceKey(lobby string) string {
	_, fence := b.lock.Keys(lockName(lobby))
	return fence
}

func (b *base) capNow() int {
	if b.capacity != nil {
		if c := b.capacity(); c >= 1 {
			return c
		}
	}
	return DefaultCapacity
}

// RunHoldLeases is how many seat leases an attachment bound to a run
// (Attach.Run) lives without a renewal of its own: its run's lease keeps it
// meanwhile, and KeepRun renews it one by one every third of that (every
// 5 minutes at the default 30-s lease). The hold is a safety net only — a
// dead or paused run's attachments end with its run's lease, a lost or
// added one is found by the keep's count at once — so it is long: the
// one-by-one renewal is the one idle cost of seats that grows with the
// users (BENCHMARKS.md, "Idle: 100,000 WebSockets over 6 nodes").
const RunHoldLeases = 30

// holdDur is the own lease of an attachment bound to a run.
func (b *base) holdDur() time.Duration { return RunHoldLeases * b.leaseDur() }

func (b *base) leaseDur() time.Duration {
	if b.lease != nil {
		if d := b.lease(); d >= time.Millisecond {
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
