package redistest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinels is the Kind of a Redis reached through Redis Sentinel.
const Sentinels Kind = "sentinel"

// ClusterOptions configure a private Redis Cluster (OwnCluster).
type ClusterOptions struct {
	// Replicas is the number of replicas per master; 0 = none. With one, a
	// killed master's replica is promoted within about NodeTimeout + 1 s.
	Replicas int
}

// clusterNodeTimeout is cluster-node-timeout of every cluster node: the time
// a master may be unreachable before the others mark it failed and its
// replica takes over. Small, so that failover tests stay short.
const clusterNodeTimeout = 2 * time.Second

// OwnCluster starts a private 3-master Redis Cluster for this test alone, so
// the test can kill its nodes. Nodes lists every process, masters first.
// It skips (fails when Strict) without redis-server and redis-cli.
func OwnCluster(tb testing.TB, opts ClusterOptions) *Redis {
	tb.Helper()
	if !Available() {
		needReal(tb, "redis-server and redis-cli are needed for a cluster")
	}
	nodes, err := startClusterNodes(3, opts.Replicas)
	for _, s := range nodes {
		tb.Cleanup(s.stop)
	}
	if err != nil {
		tb.Fatalf("redistest: cluster: %v", err)
	}
	var masters []string
	for _, s := range nodes[:3] {
		masters = append(masters, s.Addr)
	}
	r := wrap(tb, Clusters, masters, nil)
	r.Nodes = nodes
	return r
}

// startClusterNodes starts masters × (1 + replicas) cluster-enabled servers,
// joins them with redis-cli --cluster create (the first `masters` become the
// masters) and waits until every node reports cluster_state:ok and every
// replica is in sync. On error it returns the servers it started, for the
// caller to stop.
func startClusterNodes(masters, replicas int) ([]*Server, error) {
	var nodes []*Server
	var addrs []string
	for i := 0; i < masters*(1+replicas); i++ {
		// A replica whose link was down for longer than
		// node-timeout × validity-factor refuses to fail over; 0 = always
		// fail over, which is what a test that kills a master wants.
		s, err := startServer(Options{Cluster: true, Args: []string{"--cluster-replica-validity-factor", "0"}})
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, s)
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		return nodes, fmt.Errorf("redis-cli --cluster create: %v: %s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range nodes {
		for {
			ok, info := clusterNodeReady(s.Addr)
			if ok {
				break
			}
			if time.Now().After(deadline) {
				return nodes, fmt.Errorf("cluster node %s not ready after 30s: %s", s.Addr, info)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nodes, nil
}

// clusterNodeReady reports whether the node at addr sees a healthy cluster
// and, if it is a replica, is in sync with its master.
func clusterNodeReady(addr string) (bool, string) {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.ClusterInfo(ctx).Result()
	if err != nil || !strings.Contains(info, "cluster_state:ok") {
		return false, fmt.Sprint(info, err)
	}
	repl, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return false, err.Error()
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return false, repl
	}
	return true, ""
}

// NodeOf returns the process of Nodes that is the master of key's slot now,
// as the cluster's live nodes see it. It fails the test if no live node
// answers or the owner is not one of Nodes.
func (r *Redis) NodeOf(tb testing.TB, key string) *Server {
	tb.Helper()
	addr := r.clusterMasterOf(tb, key)
	for _, s := range r.Nodes {
		if s.Addr == addr {
			return s
		}
	}
	tb.Fatalf("redistest: master %s of %q is not a node of this cluster", addr, key)
	return nil
}

func (r *Redis) clusterMasterOf(tb testing.TB, key string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var lastErr error
	for _, s := range r.Nodes {
		if !s.Running() {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			slots, err = c.ClusterSlots(ctx).Result() //lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and gives the master first, all this needs
		}
		_ = c.Close()
		if err != nil {
			lastErr = err
			continue
		}
		for _, sl := range slots {
			if int64(sl.Start) <= slot && slot <= int64(sl.End) && len(sl.Nodes) > 0 {
				return sl.Nodes[0].Addr
			}
		}
		lastErr = fmt.Errorf("slot %d is not served", slot)
	}
	tb.Fatalf("redistest: no live node says who owns %q: %v", key, lastErr)
	return ""
}

// WaitFailover waits until every live node of the cluster reports
// cluster_state:ok and no slot is served by dead any more, and returns how
// long that took. It fails the test after timeout.
func (r *Redis) WaitFailover(tb testing.TB, dead *Server, timeout time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		ok, why := r.failedOver(dead)
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			tb.Fatalf("redistest: no failover away from %s within %v: %s", dead.Addr, timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *Redis) failedOver(dead *Server) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range r.Nodes {
		if !s.Running() {
			continue
		}
		c := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		info, err := c.ClusterInfo(ctx).Result()
		var slots []redis.ClusterSlot
		if err == nil {
			slots, err = c.ClusterSlots(ctx).Result() //lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and gives the master first, all this needs
		}
		_ = c.Close()
		if err != nil {
			return false, err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return false, s.Addr + " is not ok"
		}
		for _, sl := range slots {
			if len(sl.Nodes) > 0 && sl.Nodes[0].Addr == dead.Addr {
				return false, s.Addr + " still routes to the dead master"
			}
		}
	}
	return true, ""
}

// SentinelMaster is the master name the Sentinel topology monitors.
const SentinelMaster = "chatd-test"

// OwnSentinel starts, for this test alone, a master, one replica and three
// Sentinels (redis-server --sentinel with a generated config) on free
// loopback ports. Addrs are the Sentinels; Nodes are the master then the
// replica; Sentinels are the Sentinel processes. A killed master is declared
// down after 1 s and its replica promoted a second or two later. It skips
// (fails when Strict) without redis-server.
func OwnSentinel(tb testing.TB) *Redis {
	tb.Helper()
	if !Available() {
		needReal(tb, "redis-server is needed for Sentinel")
	}
	master := StartServer(tb, Options{})
	replica := StartServer(tb, Options{Args: []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.port)}})
	var sentinels []*Server
	var addrs []string
	for i := 0; i < 3; i++ {
		s, err := startSentinel(master)
		if err != nil {
			tb.Fatalf("redistest: sentinel: %v", err)
		}
		tb.Cleanup(s.stop)
		sentinels = append(sentinels, s)
		addrs = append(addrs, s.Addr)
	}
	// Wait until the replica is in sync and every Sentinel knows the
	// replica and the other Sentinels: before that a failover cannot happen.
	deadline := time.Now().Add(30 * time.Second)
	for {
		why := sentinelReady(master, replica, sentinels)
		if why == "" {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: sentinel topology not ready after 30s: %s", why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := &Redis{Addrs: addrs, Prefix: Prefix(tb), Kind: Sentinels, Nodes: []*Server{master, replica}, Sentinels: sentinels}
	r.Client = r.NewClient(tb)
	return r
}

func startSentinel(master *Server) (*Server, error) {
	dir, err := os.MkdirTemp("", "chatd-redistest-sentinel-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort(false)
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		// Sentinel rewrites its config file, so each has its own.
		text := fmt.Sprintf(`port %d
bind 127.0.0.1
dir %s
sentinel monitor %s 127.0.0.1 %d 2
sentinel down-after-milliseconds %s 1000
sentinel failover-timeout %s 10000
sentinel parallel-syncs %s 1
`, port, dir, SentinelMaster, master.port, SentinelMaster, SentinelMaster, SentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(port), port: port, dir: dir}
		s.args = []string{conf, "--sentinel", "--daemonize", "no", "--loglevel", "warning",
			"--logfile", filepath.Join(dir, "redis.log")}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	return nil, fmt.Errorf("start sentinel: %w", lastErr)
}

// sentinelReady returns "" when the replica is in sync and every Sentinel
// sees the master, the replica and two other Sentinels; otherwise why not.
func sentinelReady(master, replica *Server, sentinels []*Server) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr, MaxRetries: -1})
	repl, err := rc.Info(ctx, "replication").Result()
	_ = rc.Close()
	if err != nil || !strings.Contains(repl, "master_link_status:up") {
		return fmt.Sprint("replica not in sync: ", repl, err)
	}
	for _, s := range sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
		m, err := sc.Master(ctx, SentinelMaster).Result()
		_ = sc.Close()
		if err != nil {
			return err.Error()
		}
		if m["ip"]+":"+m["port"] != master.Addr || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
			return fmt.Sprintf("sentinel %s sees %v", s.Addr, m)
		}
	}
	return ""
}

// SentinelMasterAddr returns the master address the first Sentinel that
// answers reports now.
func (r *Redis) SentinelMasterAddr(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var lastErr error
	for _, s := range r.Sentinels {
		addr, err := sentinelMasterAddr(ctx, s)
		if err == nil {
			return addr
		}
		lastErr = err
	}
	tb.Fatalf("redistest: no Sentinel names the master: %v", lastErr)
	return ""
}

// SentinelsAgree reports whether every Sentinel names addr as the master.
// SentinelMasterAddr asks the first that answers, which after a failover
// may be the only one that knows yet: the others learn the new
// configuration from it a moment later. A killed master brought back
// before they all know can be taken by a Sentinel still on the old
// configuration for the master, and the promoted replica told to replicate
// from it — from an empty server, which wipes the data.
func (r *Redis) SentinelsAgree(tb testing.TB, addr string) bool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range r.Sentinels {
		if got, err := sentinelMasterAddr(ctx, s); err != nil || got != addr {
			return false
		}
	}
	return true
}

// sentinelMasterAddr asks the Sentinel s for the master's host:port.
func sentinelMasterAddr(ctx context.Context, s *Server) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", err
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("redistest: Sentinel %s named the master %v", s.Addr, addr)
	}
	return addr[0] + ":" + addr[1], nil
}

// MoveSlot moves the slot of key, with its keys, from its master to the
// master to, as redis-cli --cluster reshard does (SETSLOT IMPORTING and
// MIGRATING, MIGRATE, SETSLOT NODE on both). It fails the test on error.
func (r *Redis) MoveSlot(tb testing.TB, key string, to *Server) {
	tb.Helper()
	from := r.NodeOf(tb, key)
	if from == to {
		tb.Fatalf("redistest: %q is already on %s", key, to.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	src, dst := from.Client(tb), to.Client(tb)
	must := func(err error) {
		tb.Helper()
		if err != nil {
			tb.Fatalf("redistest: move slot of %q: %v", key, err)
		}
	}
	slot, err := src.ClusterKeySlot(ctx, key).Result()
	must(err)
	srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
	must(err)
	must(dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	must(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, int(slot), 100).Result()
		must(err)
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src.Do(ctx, args...).Err())
	}
	must(dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	must(src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
}
