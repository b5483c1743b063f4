package presence

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Config configures a Presence.
type Config struct {
	// Prefix is the key prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// TTL is how long a user stays online, and a node registered, after its
	// last Touch or Heartbeat; 0 = 30s. Touch and Heartbeat every TTL/3.
	TTL time.Duration
	// Retention is how long last_seen is kept after a user's last Touch or
	// Offline; 0 = 30 days.
	Retention time.Duration
	// GuestRetention is Retention for a guest (UserState.Guest): how long
	// the record of a guest is kept after its last Touch or Offline; 0 =
	// 24 hours. Never longer than Retention.
	GuestRetention time.Duration
	// Now is the clock; nil = time.Now. Online-ness is judged by it, while
	// the keys also carry real TTLs so that nothing outlives a dead cluster.
	Now func() time.Time
	// Registerer registers the presence metrics; nil = none.
	Registerer prometheus.Registerer
	// Run identifies the process (the run) of the node this Presence
	// touches for; "" = none. A claim written with a run lives as long as
	// that run's node beats (Heartbeat with Node.Run), however old the
	// claim: the node needs no per-user renewal (see Touch). Claims
	// without a run live for TTL after their Touch, as before.
	Run string
}

// Presence records who is online on which node and in which rooms, and the
// registry of live nodes. It is safe for concurrent use.
type Presence struct {
	rdb     redis.UniversalClient
	k       keys
	ttl     time.Duration
	keep    time.Duration
	guest   time.Duration // keep of a guest's record
	now     func() time.Time
	run     string
	metrics metrics
}

// New returns a Presence over rdb.
func New(rdb redis.UniversalClient, cfg Config) *Presence {
	p := &Presence{
		rdb:     rdb,
		k:       keys{ks: keyspace.New(cfg.Prefix)},
		ttl:     cfg.TTL,
		keep:    cfg.Retention,
		guest:   cfg.GuestRetention,
		now:     cfg.Now,
		run:     cfg.Run,
		metrics: newMetrics(cfg.Registerer),
	}
	if p.ttl <= 0 {
		p.ttl = 30 * time.Second
	}
	if p.keep <= 0 {
		p.keep = 30 * 24 * time.Hour
	}
	if p.keep < p.ttl {
		p.keep = p.ttl
	}
	if p.guest <= 0 {
		p.guest = DefaultGuestRetention
	}
	p.guest = min(max(p.guest, p.ttl), p.keep)
	if p.now == nil {
		p.now = time.Now
	}
	return p
}

// TTL returns the configured TTL: call Touch and Heartbeat well within it
// (every TTL/3 survives one lost tick).
func (p *Presence) TTL() time.Duration { return p.ttl }

// OnlineTTL is how long KeepOnline keeps a user in the online index: 7/3
// of the TTL (70 s at the default), so that a user written every TTL
// survives one lost write with a tick to spare. A node that dies leaves
// its users in the online count and Search for 40 to 70 s (their claims,
// which Get reads, end with its beats, one TTL); a clean disconnect
// (Offline) takes a user out at once.
func (p *Presence) OnlineTTL() time.Duration { return p.ttl * 7 / 3 }

// UserState is one user connected to a node, and the rooms it is in there.
type UserState struct {
	User  string
	Rooms []string
	// Conns are the user's connections on the node (for the admin
	// console); nil = none listed.
	Conns []Conn
	// Guest says the user is a guest (a claimed name, no account): its
	// record is kept Config.GuestRetention, not Retention, after this
	// Touch and after its Offline.
	Guest bool
}

// DefaultGuestRetention is how long a guest's record is kept after its
// last Touch or Offline when Config.GuestRetention is zero.
const DefaultGuestRetention = 24 * time.Hour

// Conn is one connection of a user on a node.
type Conn struct {
	// ID is the connection's id on its node.
	ID string `json:"id"`
	// Session is the session (token) the connection was opened with.
	Session string `json:"session"`
	// Node is the node that holds it (set by Get).
	Node string `json:"node,omitempty"`
}

// Status is what Get knows about a user.
type Status struct {
	User     string    `json:"user"`
	Online   bool      `json:"online"`
	Node     string    `json:"node"`      // the node that renewed the user last; "" when offline
	Rooms    []string  `json:"rooms"`     // sorted, over all the user's live nodes; empty when offline
	LastSeen time.Time `json:"last_seen"` // last Touch or clean Offline; zero for an unknown user
	// Conns are the user's connections on its live nodes, by node and id
	// (as the nodes last touched the user); empty when offline.
	Conns []Conn `json:"-"`
}

// Touch writes the claims of every user connected to node in ONE
// pipelined round trip: each is online, on node, in the given rooms, seen
// now. It returns an error wrapping names.ErrBadName for an invalid user
// name and ErrBadNode for a bad node id, before writing anything.
//
// Without a run (Config.Run), a claim lives TTL: the node touches all its
// users every TTL/3, two commands per user per tick, and a user it stops
// touching goes offline by itself after TTL. With a run, a claim lives as
// long as the run's node beats: the node touches a user when its rooms or
// connections change, keeps its users in the online index with KeepOnline
// (one command per 1,000 users per tick), calls Offline for a user it
// drops, and touches everyone again when Heartbeat reports Fresh (Redis
// lost the registry, or the node lapsed). Idle users then cost Redis
// nothing per user but their entry in the online index; a dead node's
// users go offline when its beats stop, as before.
func (p *Presence) Touch(ctx context.Context, node string, users []UserState) error {
	if err := checkNode(node); err != nil {
		return fmt.Errorf("presence: touch: %w", err)
	}
	if len(users) == 0 {
		return nil
	}
	roomsJSON := make([]string, len(users))
	connsJSON := make([]string, len(users))
	for i, u := range users {
		if err := names.User(u.User); err != nil {
			return fmt.Errorf("presence: touch: %w", err)
		}
		rooms := u.Rooms
		if rooms == nil {
			rooms = []string{}
		}
		b, err := json.Marshal(rooms)
		if err != nil {
			return fmt.Errorf("presence: touch %s: %w", u.User, err)
		}
		roomsJSON[i] = string(b)
		conns := u.Conns
		if conns == nil {
			conns = []Conn{}
		}
		if b, err = json.Marshal(conns); err != nil {
			return fmt.Errorf("presence: touch %s: %w", u.User, err)
		}
		connsJSON[i] = string(b)
	}
	start := time.Now()
	now := p.now()
	nowMS, exp := ms(now), ms(now.Add(p.ttl))
	if p.run != "" {
		// Readers ask the registry about a claim with a run; the expiry is
		// for a node of an older chatd during a rolling upgrade, which
		// judges claims by it alone (and drops those past it).
		exp = ms(now.Add(ClaimHorizon))
	}
	// Two bare commands per user, no script: nothing here needs atomicity.
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		members := make([]redis.Z, len(users))
		for i, u := range users {
			key := p.k.user(u.User)
			fields := []any{"node:" + node, exp, "rooms:" + node, roomsJSON[i], "conns:" + node, connsJSON[i], "last_seen", nowMS}
			if p.run != "" {
				fields = append(fields, "run:"+node, p.run)
			}
			keep := p.keep
			if u.Guest {
				// Offline reads the mark to keep the record as briefly
				fields, keep = append(fields, "guest", 1), p.guest
			} else {
				pipe.HDel(ctx, key, "guest")
			}
			pipe.HSet(ctx, key, fields...)
			pipe.PExpire(ctx, key, keep)
			members[i] = redis.Z{Score: float64(exp), Member: u.User}
		}
		p.addOnline(ctx, pipe, members)
		return nil
	})
	p.metrics.touchSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		return fmt.Errorf("presence: touch %d users on %s: %w", len(users), node, err)
	}
	p.metrics.touched.Add(float64(len(users)))
	return nil
}

// ClaimHorizon is the expiry written into a claim that has a run: longer
// than the half hour in which chatd rewrites every claim, so that a node of
// an older chatd, which judges a claim by its expiry alone, sees it live
// during a rolling upgrade. Nodes of this version judge such a claim by
// the registry: live exactly while its run's node beats.
const ClaimHorizon = time.Hour

// onlineChunk is how many users one ZADD of KeepOnline carries: large
// enough that a tick costs one command per thousand users, small enough
// that no single command holds Redis for long.
const onlineChunk = 1000

// addOnline queues the ZADDs of members into the online index, onlineChunk
// to a command.
func (p *Presence) addOnline(ctx context.Context, pipe redis.Pipeliner, members []redis.Z) {
	for start := 0; start < len(members); start += onlineChunk {
		pipe.ZAdd(ctx, p.k.online(), members[start:min(start+onlineChunk, len(members))]...)
	}
}

// KeepOnline renews users in the global online index (the count and
// Search) for OnlineTTL: one ZADD per 1,000 users, pipelined. A node with
// a run (Config.Run) calls it instead of Touch, each user at least every
// TTL — a third of its users every TTL/3 tick, and a user new since the
// last tick at once; their claims live with the node's beats. It returns
// an error wrapping names.ErrBadName for an invalid name, before writing
// anything.
//
// Each user is one argument of a ZADD, but not a cheap one: its score
// moves, so Redis takes the member out of the index's skip list and puts
// it back, comparing names with every neighbour of equal score on the
// way. Written every tick, that was most of an idle node's Redis CPU
// (perf of redis-server, 100,000 idle users over 6 nodes: sdscmp,
// zslUpdateScore and zslInsert above half); a third of the users per tick
// is a third of it.
func (p *Presence) KeepOnline(ctx context.Context, users []string) error {
	for _, u := range users {
		if err := names.User(u); err != nil {
			return fmt.Errorf("presence: keep online: %w", err)
		}
	}
	if len(users) == 0 {
		return nil
	}
	exp := float64(ms(p.now().Add(p.OnlineTTL())))
	members := make([]redis.Z, len(users))
	for i, u := range users {
		members[i] = redis.Z{Score: exp, Member: u}
	}
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		p.addOnline(ctx, pipe, members)
		return nil
	})
	if err != nil {
		return fmt.Errorf("presence: keep %d users online: %w", len(users), err)
	}
	return nil
}

// Offline records a clean disconnect of user from node: when node still
// holds the user it is dropped at once and last_seen becomes now; when the
// user is on no other node it leaves the online count. A node that no longer
// holds the user changes nothing. It returns an error wrapping
// names.ErrBadName or ErrBadNode for bad input.
func (p *Presence) Offline(ctx context.Context, user, node string) error {
	if err := names.User(user); err != nil {
		return fmt.Errorf("presence: offline: %w", err)
	}
	if err := checkNode(node); err != nil {
		return fmt.Errorf("presence: offline: %w", err)
	}
	now := ms(p.now())
	res, err := offlineScript.Run(ctx, p.rdb, []string{p.k.user(user)},
		node, now, p.keep.Milliseconds(), p.run, p.guest.Milliseconds()).Int64Slice()
	if err != nil {
		return fmt.Errorf("presence: offline %s on %s: %w", user, node, err)
	}
	if len(res) == 2 && res[0] == 1 && res[1] == 0 {
		// A Touch from another node landing between the script and this ZREM
		// is undone here until that node's next tick: the count lags by one
		// tick at most, Get is never wrong.
		if err := p.rdb.ZRem(ctx, p.k.online(), user).Err(); err != nil {
			return fmt.Errorf("presence: offline %s: %w", user, err)
		}
	}
	return nil
}

// Get returns the presence of user: one [HGETALL], a second round trip to
// the node registry when a claim carries a run (is that run's node still
// beating?), and one [HDEL] the first time it finds the claims of a node
// that died. An unknown user is
// offline with a zero LastSeen, not an error. It returns an error wrapping
// names.ErrBadName for an invalid name.
func (p *Presence) Get(ctx context.Context, user string) (Status, error) {
	if err := names.User(user); err != nil {
		return Status{}, fmt.Errorf("presence: get: %w", err)
	}
	now := ms(p.now())
	fields, err := p.rdb.HGetAll(ctx, p.k.user(user)).Result()
	if err != nil {
		return Status{}, fmt.Errorf("presence: get %s: %w", user, err)
	}
	st := Status{User: user, Rooms: []string{}}
	if v, ok := fields["last_seen"]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			st.LastSeen = time.UnixMilli(n).UTC()
		}
	}
	live := map[string]int64{} // node → its claim's expiry
	var stale []string
	var kept []string // nodes whose claim carries a run: the registry judges them
	for f, v := range fields {
		n, ok := strings.CutPrefix(f, "node:")
		if !ok {
			continue
		}
		if _, ok := fields["run:"+n]; ok {
			kept = append(kept, n) // the registry decides, whatever its expiry
			continue
		}
		exp, _ := strconv.ParseInt(v, 10, 64)
		if exp <= now {
			stale = append(stale, f, "rooms:"+n, "conns:"+n)
			continue
		}
		live[n] = exp
	}
	if len(kept) > 0 {
		// A claim written by a run lives exactly while that run's node
		// beats.
		alive, err := p.runsAlive(ctx, kept, now)
		if err != nil {
			return Status{}, fmt.Errorf("presence: get %s: %w", user, err)
		}
		for i, n := range kept {
			if alive[i] == fields["run:"+n] {
				live[n], _ = strconv.ParseInt(fields["node:"+n], 10, 64)
				continue
			}
			stale = append(stale, "node:"+n, "run:"+n, "rooms:"+n, "conns:"+n)
		}
	}
	var newest int64
	for n, exp := range live {
		if st.Node == "" || exp > newest || exp == newest && n > st.Node {
			newest, st.Node = exp, n // the node that wrote the user last
		}
	}
	st.Online = len(live) > 0
	for f, v := range fields {
		n, isRooms := strings.CutPrefix(f, "rooms:")
		if !isRooms {
			var isConns bool
			if n, isConns = strings.CutPrefix(f, "conns:"); !isConns {
				continue
			}
		}
		_, isLive := live[n]
		switch _, claimed := fields["node:"+n]; {
		case isLive && isRooms:
			var rooms []string
			if err := json.Unmarshal([]byte(v), &rooms); err == nil {
				st.Rooms = append(st.Rooms, rooms...)
			}
		case isLive:
			var conns []Conn
			if err := json.Unmarshal([]byte(v), &conns); err == nil {
				for _, c := range conns {
					c.Node = n
					st.Conns = append(st.Conns, c)
				}
			}
		case !claimed:
			stale = append(stale, f) // a Touch that raced an Offline
		}
	}
	for f := range fields {
		if n, ok := strings.CutPrefix(f, "run:"); ok {
			if _, claimed := fields["node:"+n]; !claimed {
				stale = append(stale, f)
			}
		}
	}
	slices.SortFunc(st.Conns, func(a, b Conn) int { return strings.Compare(a.Node+"\x00"+a.ID, b.Node+"\x00"+b.ID) })
	slices.Sort(st.Rooms)
	st.Rooms = slices.Compact(st.Rooms)
	if len(stale) > 0 {
		// The claims of nodes that died holding the user: drop them here,
		// once, rather than look for them on every Touch.
		if err := p.rdb.HDel(ctx, p.k.user(user), stale...).Err(); err != nil {
			return Status{}, fmt.Errorf("presence: get %s: drop dead nodes: %w", user, err)
		}
	}
	return st, nil
}

// runsAlive returns, for each node, the run that beats for it now ("" when
// the node is not live): one round trip to the registry.
func (p *Presence) runsAlive(ctx context.Context, nodes []string, now int64) ([]string, error) {
	var beats *redis.FloatSliceCmd
	var runs *redis.SliceCmd
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		beats = pipe.ZMScore(ctx, p.k.nodeBeats(), nodes...)
		runs = pipe.HMGet(ctx, p.k.nodeRuns(), nodes...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the node registry: %w", err)
	}
	out := make([]string, len(nodes))
	for i, v := range runs.Val() {
		s, _ := v.(string)
		if i < len(beats.Val()) && int64(beats.Val()[i]) > now {
			out[i] = s
		}
	}
	return out, nil
}

// MaxSearch is the most users Search returns.
const MaxSearch = 100

// Search returns the online users whose name starts with prefix, letters
// compared case-insensitively (as names.Canonical does), sorted, at most
// limit (1 to
// MaxSearch): a [ZSCAN] of the online index with MATCH, so its cost grows
// with the number of users online (an admin read, not a user one). It
// returns an error wrapping names.ErrBadName for a prefix that is not the
// start of a valid user name.
func (p *Presence) Search(ctx context.Context, prefix string, limit int) ([]string, error) {
	if err := names.User(prefix); err != nil {
		return nil, fmt.Errorf("presence: search: %w", err)
	}
	limit = min(max(limit, 1), MaxSearch)
	now := float64(ms(p.now()))
	match := foldPattern(prefix) + "*"
	var found []string
	var cursor uint64
	for {
		kv, next, err := p.rdb.ZScan(ctx, p.k.online(), cursor, match, 500).Result()
		if err != nil {
			return nil, fmt.Errorf("presence: search %q: %w", prefix, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if exp, err := strconv.ParseFloat(kv[i+1], 64); err == nil && exp > now {
				found = append(found, kv[i])
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	slices.Sort(found)
	found = slices.Compact(found)
	if len(found) > limit {
		found = found[:limit]
	}
	return found, nil
}

// foldPattern is a MATCH pattern for s with each letter matching either
// case: "Al-1" is "[aA][lL]-1". Names hold only [A-Za-z0-9_-], so no other
// glob character can reach MATCH.
func foldPattern(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		lo := names.Canonical(string(c))
		if up := strings.ToUpper(lo); up != lo {
			b.WriteString("[" + lo + up + "]")
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Online returns how many users are online on any node, trimming the users
// whose TTL ran out: one round trip.
func (p *Presence) Online(ctx context.Context) (int64, error) {
	now := strconv.FormatInt(ms(p.now()), 10)
	var count *redis.IntCmd
	_, err := p.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZRemRangeByScore(ctx, p.k.online(), "-inf", now)
		count = pipe.ZCount(ctx, p.k.online(), "("+now, "+inf")
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("presence: online count: %w", err)
	}
	return count.Val(), nil
}

func checkNode(node string) error {
	if node == "" || len(node) > 128 || strings.ContainsAny(node, "{}\x00") {
		return fmt.Errorf("%w %q", ErrBadNode, node)
	}
	return nil
}

func ms(t time.Time) int64 { return t.UnixMilli() }
