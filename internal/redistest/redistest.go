// Package redistest gives each test a clean Redis: a real redis-server
// whenever one can be had, so tests exercise the real server's semantics
// (Lua, TTLs, pub/sub, Cluster slots), and can inject real faults (kill,
// SIGSTOP, restart).
//
// Order of preference for New:
//  1. CHATD_TEST_REDIS=host:port — an existing server (never flushed);
//  2. a private redis-server from PATH on a free loopback port, started once
//     per test binary and shared by its tests;
//  3. embedded miniredis, with a t.Log notice (not in strict mode).
//
// Every test gets its own key prefix (Prefix), so tests run in parallel on one
// server and never FLUSHDB. CHATD_TEST_STRICT=1 turns every "skip" or
// "fallback" into a failure: CI runs strict, so no test silently runs on less
// than it claims.
//
// Started processes die with the test binary (Pdeathsig), even when it crashes.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/embedded"
)

// Kind says what kind of server a Redis is.
type Kind string

// The kinds of server New may return.
const (
	External Kind = "external" // CHATD_TEST_REDIS
	Private  Kind = "private"  // redis-server started by this package
	Embedded Kind = "embedded" // in-process miniredis
	Clusters Kind = "cluster"  // 3-master Redis Cluster
)

// Redis is the Redis a test got: a client, the address, and a key prefix of
// its own.
type Redis struct {
	// Client is a client of the server, closed when the test ends.
	Client redis.UniversalClient
	// Addrs are the server addresses (three for a cluster).
	Addrs []string
	// Prefix is a key prefix unique to the test.
	Prefix string
	// Kind says which server this is.
	Kind Kind
	// Server is the private server when Kind is Private and the test asked
	// for one of its own (Own); nil otherwise. Faults go through it.
	Server *Server
	// Nodes are the data-bearing processes of a topology the test owns:
	// every node of an OwnCluster (masters first), or the master then the
	// replica of an OwnSentinel; nil otherwise.
	Nodes []*Server
	// Sentinels are the Sentinel processes of an OwnSentinel; nil otherwise.
	Sentinels []*Server
}

// NewClient returns another independent client of the same server or
// cluster, closed when the test ends: each simulated chatd node uses its own.
func (r *Redis) NewClient(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	c := newClient(r.Kind, r.Addrs)
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// URL returns the --redis flag value that reaches this server.
func (r *Redis) URL() string {
	switch r.Kind {
	case Clusters:
		return strings.Join(r.Addrs, ",")
	case Sentinels:
		return "redis-sentinel://" + strings.Join(r.Addrs, ",") + "/" + SentinelMaster
	}
	return "redis://" + r.Addrs[0] + "/0"
}

func newClient(kind Kind, addrs []string) redis.UniversalClient {
	switch kind {
	case Clusters:
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	case Sentinels:
		return redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: addrs})
	}
	return redis.NewClient(&redis.Options{Addr: addrs[0]})
}

// Strict reports whether CHATD_TEST_STRICT=1: tests that would skip or fall
// back to the embedded server fail instead.
func Strict() bool { return os.Getenv("CHATD_TEST_STRICT") == "1" }

// Prefix returns a key prefix unique to this test run and test.
func Prefix(tb testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", ".", " ", "_", "{", "(", "}", ")").Replace(tb.Name())
	if len(name) > 40 {
		name = name[len(name)-40:]
	}
	return "t." + name + "." + hex.EncodeToString(b[:])
}

// New returns a Redis for the test, in the order of preference of the
// package doc.
func New(tb testing.TB) *Redis {
	tb.Helper()
	if addr := os.Getenv("CHATD_TEST_REDIS"); addr != "" {
		return wrap(tb, External, []string{addr}, nil)
	}
	if Available() {
		s, err := shared.get()
		if err != nil {
			tb.Fatalf("redistest: shared server: %v", err)
		}
		return wrap(tb, Private, []string{s.Addr}, nil)
	}
	if Strict() {
		tb.Fatalf("redistest: CHATD_TEST_STRICT=1 but redis-server is not on PATH and CHATD_TEST_REDIS is unset")
	}
	tb.Log("redistest: redis-server not found; using embedded miniredis (install redis-server for real-server tests)")
	e, err := embedded.Start()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(e.Close)
	return wrap(tb, Embedded, []string{e.Addr()}, nil)
}

// Real returns a real redis-server (external or private), or skips the test
// when there is none — and fails instead when Strict.
func Real(tb testing.TB) *Redis {
	tb.Helper()
	if os.Getenv("CHATD_TEST_REDIS") == "" && !Available() {
		needReal(tb, "redis-server is not on PATH")
	}
	return New(tb)
}

// InProcess starts an embedded miniredis for this test alone, whatever
// else is available: for the tests that check that something works on the
// embedded default of `go run ./cmd/chatd` too (its Lua interpreter,
// gopher-lua, lacks some of Redis's libraries). Never skipped.
func InProcess(tb testing.TB) *Redis {
	tb.Helper()
	e, err := embedded.Start()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	tb.Cleanup(e.Close)
	return wrap(tb, Embedded, []string{e.Addr()}, nil)
}

// Own starts a private redis-server for this test alone, so the test can
// kill, pause or restart it. It skips (fails when Strict) without redis-server.
func Own(tb testing.TB, opts Options) *Redis {
	tb.Helper()
	if !Available() {
		needReal(tb, "redis-server is not on PATH")
	}
	s := StartServer(tb, opts)
	return wrap(tb, Private, []string{s.Addr}, s)
}

// Cluster returns the 3-master Redis Cluster shared by this test binary,
// started on first use. It skips (fails when Strict) without redis-server.
func Cluster(tb testing.TB) *Redis {
	tb.Helper()
	if !Available() {
		needReal(tb, "redis-server and redis-cli are needed for a cluster")
	}
	addrs, err := sharedCluster.get()
	if err != nil {
		tb.Fatalf("redistest: cluster: %v", err)
	}
	return wrap(tb, Clusters, addrs, nil)
}

func needReal(tb testing.TB, why string) {
	tb.Helper()
	if Strict() {
		tb.Fatalf("redistest: CHATD_TEST_STRICT=1 and %s", why)
	}
	tb.Skipf("redistest: %s", why)
}

func wrap(tb testing.TB, kind Kind, addrs []string, s *Server) *Redis {
	tb.Helper()
	r := &Redis{Addrs: addrs, Prefix: Prefix(tb), Kind: kind, Server: s}
	r.Client = r.NewClient(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Client.Ping(ctx).Err(); err != nil {
		tb.Fatalf("redistest: %s redis at %v: %v", kind, addrs, err)
	}
	return r
}

// lazy starts a resource once per test binary.
type lazy[T any] struct {
	once sync.Once
	v    T
	err  error
	fn   func() (T, error)
}

func (l *lazy[T]) get() (T, error) {
	l.once.Do(func() { l.v, l.err = l.fn() })
	return l.v, l.err
}

var shared = &lazy[*Server]{fn: func() (*Server, error) { return startServer(Options{}) }}

var sharedCluster = &lazy[[]string]{fn: startCluster}

// startCluster starts the shared 3-master cluster (no replicas); its
// processes live as long as the test binary.
func startCluster() ([]string, error) {
	nodes, err := startClusterNodes(3, 0)
	if err != nil {
		for _, s := range nodes {
			s.stop()
		}
		return nil, err
	}
	var addrs []string
	for _, s := range nodes {
		addrs = append(addrs, s.Addr)
	}
	return addrs, nil
}

// Backend is one way of getting a test's Redis (New, Real, InProcess,
// Cluster), with the name its subtest runs under.
type Backend struct {
	Name  string
	Start func(testing.TB) *Redis
}

// Each runs fn as a parallel subtest on a Redis of each backend, so a test
// that must hold on a single server, embedded and a Cluster says so in one
// line instead of a table of its own.
func Each(t *testing.T, backends []Backend, fn func(t *testing.T, r *Redis)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.Start(t))
		})
	}
}
