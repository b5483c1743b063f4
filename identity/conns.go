package identity

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/promreg"
	"github.com/chatd/chatd/names"
)

// DefaultLease is how long a connection's lease lasts after its last Admit
// or Renew when ConnsConfig.Lease is nil or returns less than a millisecond.
const DefaultLease = 60 * time.Second

// MaxConnIDLen is the longest connection id, in bytes.
const MaxConnIDLen = 64

// ConnsConfig configures a Conns. The zero value is usable.
type ConnsConfig struct {
	// Prefix is the key prefix; "" means keyspace.DefaultPrefix.
	Prefix string
	// Lease returns how long a connection counts after its last Admit or
	// Renew, read on every call; nil, or less than a millisecond, means
	// DefaultLease. The caller renews every Lease/3, so a connection
	// survives two lost renewals, and the connections of a node that died
	// stop counting at most one lease after its last renewal.
	Lease func() time.Duration
	// Now is the clock of the lease ends written to Redis; nil means
	// time.Now. Nodes compare each other's lease ends, so their clocks must
	// agree to well under a lease (NTP gives milliseconds).
	Now func() time.Time
	// Registerer receives chatd_identity_conns_total{op, result}; nil means
	// not registered. Several Conns may share one.
	Registerer prometheus.Registerer
	// Live returns the runs of the live nodes (from the node registry's
	// heartbeats), or nil when the caller does not know them now. A
	// connection id is <run>-<n>: its run is everything before its last
	// '-'. When Live gives runs, a lease of a live run counts however long
	// ago it was written, so the node holding it need not Renew it: the
	// connections of an idle node cost Redis nothing, and those of a node
	// that died stop counting when its run leaves the registry. nil means
	// leases count until they end, and the caller renews them.
	Live func() []string
	// Keep is how long an address's key lasts after its last Admit or
	// Refresh when Live gives runs (its leases are not renewed then); 0
	// means DefaultKeep. The node holding connections calls Refresh for
	// their addresses every Keep/3: one PEXPIRE per address, not per
	// lease per tick. The key of a node that died goes Keep after its last
	// refresh, unless an admission from the address dropped its leases
	// first.
	Keep time.Duration
}

// DefaultKeep is ConnsConfig.Keep's default.
const DefaultKeep = time.Hour

// Conn names one leased connection: the client address as given to Admit
// and the connection id.
type Conn struct {
	Addr string
	ID   string
}

// Conns counts the WebSockets of each client address across all nodes, as
// leases in Redis, so that one address cannot hold more than a cap of
// them. It is safe for concurrent use and keeps no local state; every node
// uses its own Conns on the same Redis.
type Conns struct {
	rdb   redis.Cmdable
	space keyspace.Space
	lease func() time.Duration
	now   func() time.Time
	live  func() []string
	keep  time.Duration
	calls *prometheus.CounterVec
}

// NewConns returns a Conns whose leases live in rdb.
func NewConns(rdb redis.Cmdable, cfg ConnsConfig) *Conns {
	c := &Conns{
		rdb:   rdb,
		space: keyspace.New(cfg.Prefix),
		lease: cfg.Lease,
		now:   cfg.Now,
		live:  cfg.Live,
		keep:  cfg.Keep,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "chatd", Subsystem: "identity", Name: "conns_total",
			Help: "Connection-lease calls by op (admit, renew, release) and result " +
				"(admitted, refused, renewed, released, error).",
		}, []string{"op", "result"}),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.keep <= 0 {
		c.keep = DefaultKeep
	}
	if cfg.Registerer != nil {
		c.calls = promreg.Register(cfg.Registerer, c.calls)
	}
	return c
}

// Keep returns ConnsConfig.Keep (or its default): call Refresh every
// Keep()/3 while Live gives runs.
func (c *Conns) Keep() time.Duration { return c.keep }

// Refresh keeps the keys of the addresses of conns for Keep(): one
// PEXPIRE per address, pipelined (go-redis sends one pipeline per shard on
// Cluster). Call it every Keep()/3 with the node's open connections while
// ConnsConfig.Live gives runs; their leases count without renewal then.
// It returns names.ErrBadName (wrapped) for a bad address or id, before
// sending anything, or the first Redis error.
func (c *Conns) Refresh(ctx context.Context, conns []Conn) error {
	seen := map[string]bool{}
	var keys []string
	for _, cn := range conns {
		k, err := c.key(cn.Addr, cn.ID)
		if err != nil {
			return fmt.Errorf("identity: refresh: %w", err)
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	keep := c.keyTTL(c.Lease())
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.PExpire(ctx, k, keep)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("identity: refresh %d addresses: %w", len(keys), err)
	}
	return nil
}

// keyTTL is how long an address's key lasts when leases of live runs are
// not renewed: Keep, and never less than a lease.
func (c *Conns) keyTTL(lease time.Duration) time.Duration { return max(c.keep, lease) }

// Lease returns the lease length in force now; renew every Lease()/3.
func (c *Conns) Lease() time.Duration {
	if c.lease != nil {
		if d := c.lease(); d >= time.Millisecond {
			return d
		}
	}
	return DefaultLease
}

// Admit gives connection connID of client address addr (an IPv4 or IPv6
// address as Fiber's c.IP() gives it; an IPv6 /64 counts as one address, as
// in RateKey) a lease of Lease(), unless the address already holds max
// live leases of other connections: ok is false then, no lease is written,
// and the upgrade should be refused (429 too_many_connections). max <= 0
// means no cap, but the lease is still recorded so that a cap set later
// counts the connections already open. Admit is idempotent: a connection
// that holds a lease gets it renewed, even at the cap. Leases that have
// ended are dropped by the same script (with ConnsConfig.Live: the leases
// that ended and whose run is not live: a full read of the address's
// leases, done once per change of the live runs or of the leases that
// count by their end, and marked, so that other admissions are O(log n);
// see conns_admit.lua). It returns names.ErrBadName (wrapped) for an
// address that does not parse or a bad connection id (1-MaxConnIDLen of
// [A-Za-z0-9_-]), or the Redis error with ok false. One round trip.
func (c *Conns) Admit(ctx context.Context, addr, connID string, max int) (ok bool, err error) {
	k, mk, err := c.keys(addr, connID)
	if err != nil {
		c.calls.WithLabelValues("admit", "error").Inc()
		return false, fmt.Errorf("identity: admit connection: %w", err)
	}
	if max < 0 {
		max = 0
	}
	lease := c.Lease()
	args := []any{c.now().UnixMilli(), lease.Milliseconds(), max, connID, lease.Milliseconds()}
	if c.live != nil {
		if runs := c.live(); len(runs) > 0 {
			args[4] = c.keyTTL(lease).Milliseconds()
			// sorted: the script compares them with its mark's as one text
			runs = slices.Sorted(slices.Values(runs))
			for _, r := range runs {
				args = append(args, r)
			}
		}
	}
	res, err := admitScript.Run(ctx, c.rdb, []string{k, mk}, args...).Int64()
	if err != nil {
		c.calls.WithLabelValues("admit", "error").Inc()
		return false, fmt.Errorf("identity: admit connection %s: %w", connID, err)
	}
	if res != 1 {
		c.calls.WithLabelValues("admit", "refused").Inc()
		return false, nil
	}
	c.calls.WithLabelValues("admit", "admitted").Inc()
	return true, nil
}

// key returns the lease key of addr, validating addr and connID.
func (c *Conns) key(addr, connID string) (string, error) {
	k, _, err := c.keys(addr, connID)
	return k, err
}

// keys returns the lease key of addr and its mark's (connsMarkKey),
// validating addr and connID.
func (c *Conns) keys(addr, connID string) (conns, mark string, err error) {
	if err := checkConnID(connID); err != nil {
		return "", "", err
	}
	k, err := RateKey(addr)
	if err != nil {
		return "", "", err
	}
	return connsKey(c.space, k), connsMarkKey(c.space, k), nil
}

// Renew extends the lease of every connection in conns by Lease() from now,
// in one pipeline (per address a ZADD XX of its connections, a PEXPIRE of
// its key, and a DEL of its mark: a renewed lease may end sooner than the
// mark says, when the lease was shortened; on Redis Cluster go-redis sends
// one pipeline per shard).
// Call it every Lease()/3 with the node's open connections. A lease that
// has already ended (the node stalled for a whole lease, or Redis lost it)
// is not created again: that connection goes uncounted until it closes,
// which errs towards admitting, never towards refusing. It returns
// names.ErrBadName (wrapped) for a bad address or id, before sending
// anything, or the first Redis error (the other commands were still sent).
func (c *Conns) Renew(ctx context.Context, conns []Conn) error {
	if len(conns) == 0 {
		return nil
	}
	byKey := map[string][]redis.Z{}
	marks := map[string]string{}
	var order []string
	lease := c.Lease()
	end := float64(c.now().Add(lease).UnixMilli())
	for _, cn := range conns {
		k, mk, err := c.keys(cn.Addr, cn.ID)
		if err != nil {
			c.calls.WithLabelValues("renew", "error").Inc()
			return fmt.Errorf("identity: renew: %w", err)
		}
		if _, seen := byKey[k]; !seen {
			order = append(order, k)
			marks[k] = mk
		}
		byKey[k] = append(byKey[k], redis.Z{Score: end, Member: cn.ID})
	}
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range order {
			p.ZAddXX(ctx, k, byKey[k]...)
			p.PExpire(ctx, k, lease)
			// a renewed lease may now end before what the mark says
			p.Del(ctx, marks[k])
		}
		return nil
	})
	if err != nil {
		c.calls.WithLabelValues("renew", "error").Inc()
		return fmt.Errorf("identity: renew %d connections: %w", len(conns), err)
	}
	c.calls.WithLabelValues("renew", "renewed").Add(float64(len(conns)))
	return nil
}

// Release ends connID's lease at once (the WebSocket closed), freeing its
// place under the cap. Releasing a connection that holds no lease is not
// an error. It returns names.ErrBadName (wrapped) for a bad address or id,
// or the Redis error. One command (ZREM; the key goes with its last
// member).
func (c *Conns) Release(ctx context.Context, addr, connID string) error {
	k, err := c.key(addr, connID)
	if err != nil {
		c.calls.WithLabelValues("release", "error").Inc()
		return fmt.Errorf("identity: release connection: %w", err)
	}
	if err := c.rdb.ZRem(ctx, k, connID).Err(); err != nil {
		c.calls.WithLabelValues("release", "error").Inc()
		return fmt.Errorf("identity: release connection %s: %w", connID, err)
	}
	c.calls.WithLabelValues("release", "released").Inc()
	return nil
}

// Count returns how many live leases addr holds now (for an admin view or
// a test; Admit does not need it). It returns names.ErrBadName (wrapped)
// for an address that does not parse, or the Redis error. One ZCOUNT.
func (c *Conns) Count(ctx context.Context, addr string) (int, error) {
	k, err := RateKey(addr)
	if err != nil {
		return 0, fmt.Errorf("identity: count connections: %w", err)
	}
	n, err := c.rdb.ZCount(ctx, connsKey(c.space, k), "("+strconv.FormatInt(c.now().UnixMilli(), 10), "+inf").Result()
	if err != nil {
		return 0, fmt.Errorf("identity: count connections: %w", err)
	}
	return int(n), nil
}

// checkConnID validates a connection id: 1-MaxConnIDLen of [A-Za-z0-9_-].
func checkConnID(id string) error {
	if id == "" || len(id) > MaxConnIDLen {
		return fmt.Errorf("%w: connection id must have 1-%d characters", names.ErrBadName, MaxConnIDLen)
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-') {
			return fmt.Errorf("%w: connection id may only hold A-Z a-z 0-9 _ -", names.ErrBadName)
		}
	}
	return nil
}
