package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// redactRedis replaces, in msg, the user info of the --redis value s (a
// password, e.g. redis://:hunter2@host/0) with ***, so that error messages
// and logs never carry it, whether or not s parses.
func redactRedis(msg, s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return msg
	}
	rest := s[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return msg
	}
	red := s[:i+3] + "***@" + rest[at+1:]
	quote := func(x string) string { q := strconv.Quote(x); return q[1 : len(q)-1] }
	msg = strings.ReplaceAll(msg, s, red)
	msg = strings.ReplaceAll(msg, quote(s), quote(red))
	// the parser may have quoted a part of it: hide the password itself
	if _, pass, ok := strings.Cut(rest[:at], ":"); ok && len(pass) >= 4 {
		for _, form := range []string{pass, quote(pass), url.PathEscape(pass), url.QueryEscape(pass)} {
			msg = strings.ReplaceAll(msg, form, "***")
		}
	}
	return msg
}

// maskRedisPassword hides the password of a --redis URL for
// --print-config, keeping a username (redis://user:***@host/0); a URL
// with user info alone (which go-redis takes as the password) becomes
// redis://***@host/0.
func maskRedisPassword(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return s[:i+3] + "***" + rest[at:]
	}
	return s[:i+3] + user + ":***" + rest[at:]
}

// redisSpec is a parsed --redis value.
type redisSpec struct {
	single   *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

// redisOptions parses --redis: a redis:// or rediss:// URL, a
// redis-sentinel:// URL, or a comma-separated host:port list (a cluster; a
// single bare host:port is a single server).
func redisOptions(s string) (redisSpec, error) {
	switch {
	case strings.HasPrefix(s, "redis://"), strings.HasPrefix(s, "rediss://"), strings.HasPrefix(s, "unix://"):
		o, err := redis.ParseURL(s)
		if err != nil {
			return redisSpec{}, fmt.Errorf("%q: %v", s, err)
		}
		return redisSpec{single: o}, nil
	case strings.HasPrefix(s, "redis-sentinel://"):
		return sentinelOptions(s)
	case strings.Contains(s, "://"):
		return redisSpec{}, fmt.Errorf("%q: expected redis://host:port/db, redis-sentinel://host:port/master or host:port,host:port", s)
	}
	var addrs []string
	for _, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return redisSpec{}, fmt.Errorf("%q: %q is not host:port", s, a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 1 {
		return redisSpec{single: &redis.Options{Addr: addrs[0]}}, nil
	}
	return redisSpec{cluster: &redis.ClusterOptions{Addrs: addrs}}, nil
}

func sentinelOptions(s string) (redisSpec, error) {
	u, err := url.Parse(s)
	if err != nil {
		return redisSpec{}, fmt.Errorf("%q: %v", s, err)
	}
	master := strings.Trim(u.Path, "/")
	if u.Host == "" || master == "" {
		return redisSpec{}, fmt.Errorf("%q: expected redis-sentinel://host:port[,host:port]/master", s)
	}
	o := &redis.FailoverOptions{MasterName: master, SentinelAddrs: strings.Split(u.Host, ",")}
	if u.User != nil {
		o.Password, _ = u.User.Password()
		o.Username = u.User.Username()
	}
	if db := u.Query().Get("db"); db != "" {
		if _, err := fmt.Sscanf(db, "%d", &o.DB); err != nil {
			return redisSpec{}, fmt.Errorf("%q: db must be a number", s)
		}
	}
	if u.Query().Get("tls") == "true" {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return redisSpec{failover: o}, nil
}

// client builds the go-redis client for spec with chatd's timeouts: short
// enough that a hung Redis fails a request in about two seconds instead of
// hanging it. A cluster client follows a master's failover within a second
// of the cluster's own (newClusterClient); a Sentinel client asks the
// Sentinels for the master on every new connection and drops its pools when
// they announce a switch (+switch-master), which go-redis does by itself. The pool is larger than go-redis's default (10 per CPU): a
// burst of says from thousands of WebSockets otherwise waits on the pool and
// fails as if Redis were down (measured with cmd/chatbench: 14% of says at
// 2,000 clients on one 2-core node).
//
// go-redis sends a command again (retries = 1; on a Cluster also after a
// redirection, so a few times) after a network error or a read timeout,
// and a plain pipeline whole. A read timeout does not mean the command did
// not run: a Redis that stalls (SIGSTOP, a long fork, a saturated link)
// runs both copies when it wakes, and a chatd paused while it waited (a
// frozen VM, SIGSTOP) sends the copy when it wakes, however long that was,
// unless the call's context has ended. The retry stays, on purpose, and
// every write is made safe to run twice:
//   - a write with a client's idempotency key (a say's session+ref, the
//     Idempotency-Key of message, score and purchase posts, a direct
//     message's ref) is checked against it in the script that writes, so
//     its second copy answers the first one's result;
//   - a write without one is keyed by its call: a say or message post
//     (rooms), a score post (ranking), a direct message (direct), a dirty
//     take (dirty: the mask it took), an admin notice (notices). That
//     record lives 30 s, and each such call's context ends 10 s after it
//     starts (whatever the request's), so no copy is sent once the record
//     may be gone;
//   - a ticket submission finds its own ticket, and a party acceptance its
//     own acceptance, whatever became of them since (an ended ticket is
//     kept 10 minutes; these calls too end within 10 s);
//   - a MULTI/EXEC (purchases, grants) is never re-sent: go-redis does not
//     retry a transaction whose read failed;
//   - the rest converges when run twice (seats, read marks, the registry)
//     or is a counter, whose double count is cosmetic.
//
// A client's own repeat of a request without a key is a new request:
// docs/PROTOCOL.md ("What a client may retry, and how") tells clients to
// send keys. deploy/exact_test.go pauses Redis under keyed says and
// increments to check each applies once, and each package's tests send a
// call twice with other writes in between (redistest.Resend).
// Without the retry a stall of a second would answer 503 to requests that
// succeed a moment later, and the outcome would be just as unknown.
func (spec redisSpec) client() redis.UniversalClient {
	const (
		dial    = 2 * time.Second
		rw      = 2 * time.Second
		retries = 1
	)
	pool := max(128, 10*runtime.GOMAXPROCS(0))
	switch {
	case spec.cluster != nil:
		o := spec.cluster
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = dial, rw, rw, retries
		o.ContextTimeoutEnabled, o.PoolSize = true, pool
		// A dead master is dialed at most twice per attempt (go-redis tries
		// five times by default: ten seconds when its host is gone), and the
		// slot map is re-read every 10 s even without errors (60 s by
		// default). Failover itself is followed by clusterFollower.
		o.DialerRetries = 2
		o.ClusterStateReloadInterval = 10 * time.Second
		return newClusterClient(o)
	case spec.failover != nil:
		o := spec.failover
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = dial, rw, rw, retries
		o.ContextTimeoutEnabled, o.PoolSize = true, pool
		o.OnConnect = requireMaster
		return redis.NewFailoverClient(o)
	default:
		o := spec.single
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = dial, rw, rw, retries
		o.ContextTimeoutEnabled, o.PoolSize = true, pool
		return redis.NewClient(o)
	}
}

// requireMaster is the Sentinel client's OnConnect: a connection whose
// server answers ROLE as a replica is refused, and the command that dialed
// it fails with a READONLY error, which go-redis retries on a new
// connection (and chatd answers redis_unavailable if that fails too).
//
// go-redis asks a Sentinel for the master's address on every new
// connection and trusts the answer. Right after a failover a Sentinel can
// still name the old master — the Sentinels learn the new configuration
// from each other within a second or two — and a killed master that comes
// back as a replica of the new one is then reachable at that address: a
// connection there reads the replica's data (empty until its first sync
// ends: a node saw its settings "go back" to version 0), refuses writes,
// and a pub/sub connection there gets nothing published on the new master
// until the sync ends, a gap no reconnect reports. Redis's guidelines for
// Sentinel clients say the same: after connecting to the address a
// Sentinel gave, call ROLE and start over unless it is a master. A
// Sentinel's own connections answer ROLE "sentinel" and pass; a server that
// refuses ROLE (an ACL without it) passes unchecked.
func requireMaster(ctx context.Context, cn *redis.Conn) error {
	role, err := cn.Do(ctx, "ROLE").Slice()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) {
			return nil // ROLE refused: nothing to check against
		}
		return err
	}
	if len(role) > 0 && (role[0] == "slave" || role[0] == "replica") {
		return notMasterError{addr: cn.String()}
	}
	return nil
}

// notMasterError is requireMaster's refusal: a Redis error reply in form
// ("READONLY …", as a write there would be answered), so go-redis retries the
// command on a new connection and errcode maps it to redis_unavailable.
type notMasterError struct{ addr string }

func (e notMasterError) Error() string {
	return "READONLY chatd: a Sentinel named a replica as the master (" + e.addr +
		"; stale after a failover): the connection was refused and the next one asks again"
}

// RedisError marks it as a Redis error reply (redis.Error).
func (notMasterError) RedisError() {}

// clusterFollower makes a go-redis ClusterClient follow a failover at once.
//
// go-redis reloads its slot map (CLUSTER SLOTS) on a MOVED or ASK reply, on
// READONLY, and otherwise only when the map is older than
// ClusterOptions.ClusterStateReloadInterval (60 s by default). A master that
// dies answers nothing — no MOVED ever comes — so after its replica is
// promoted the client keeps routing that master's slots to the dead address
// (connection refused, or dial timeouts when the host is gone) until the
// interval runs out: a minute of failed writes to a third of the keys after a
// failover the cluster itself finished in seconds.
//
// As a hook on every node client (ClusterClient.OnNewNode), it asks for a
// reload (ClusterClient.ReloadState: asynchronous, coalesced by go-redis to
// one CLUSTER SLOTS in flight and at most one more per 200 ms) whenever a node
// fails to dial, fails on the network, or answers CLUSTERDOWN or TRYAGAIN.
// The next command (go-redis's own retry, or the caller's) then routes by the
// promoted replica. Pub/sub connections dial through the same hook, so the
// bus's reconnect also finds the new master.
type clusterFollower struct{ cc *redis.ClusterClient }

var _ redis.Hook = clusterFollower{}

// DialHook reloads the slot map when a node cannot be dialed.
func (f clusterFollower) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cn, err := next(ctx, network, addr)
		if err != nil {
			f.cc.ReloadState(ctx)
		}
		return cn, err
	}
}

// ProcessHook reloads the slot map when a command fails as if its node were
// gone.
func (f clusterFollower) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if nodeGone(err) {
			f.cc.ReloadState(ctx)
		}
		return err
	}
}

// ProcessPipelineHook reloads the slot map when a pipeline (or a script run
// in one) fails as if its node were gone.
func (f clusterFollower) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if nodeGone(err) {
			f.cc.ReloadState(ctx)
		}
		return err
	}
}

// nodeGone reports whether err says the node may no longer serve its slots:
// anything but a reply from the server (a network error or timeout), or a
// CLUSTERDOWN or TRYAGAIN reply. redis.Nil and a caller's cancellation say
// nothing about the node.
func nodeGone(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		return strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "TRYAGAIN")
	}
	return true
}

// newClusterClient returns a ClusterClient for o that follows failovers (see
// clusterFollower).
func newClusterClient(o *redis.ClusterOptions) *redis.ClusterClient {
	cc := redis.NewClusterClient(o)
	f := clusterFollower{cc}
	// Node clients are made lazily, on the first command; this runs first.
	cc.OnNewNode(func(node *redis.Client) { node.AddHook(f) })
	return cc
}
