package deploy

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// The pub/sub work of room events on a 3-master Redis Cluster, classic
// (PUBLISH/SUBSCRIBE: every message crosses the cluster bus to every
// master) against sharded (SPUBLISH/SSUBSCRIBE: the slot's master alone),
// measured on the masters themselves: CPU (INFO cpu), publish commands
// (INFO commandstats) and cluster-bus publish messages received (CLUSTER
// INFO), for the same messages to rooms spread over every slot range, with
// three subscriber Buses (three chatd nodes) subscribed to every room. A
// single redis-server is measured the same way for deliveries per second
// with one master. The figures go to BENCHMARKS.md; the test asserts only
// the fan-out (classic: each master receives about every message over the
// cluster bus; sharded: none), which is what the figures rest on.
//
// CHATD_PUBSUB_MESSAGES sets the number of messages per mode (default
// 3,000; BENCHMARKS.md used 20,000).

// masterStats are the counters of one master the measurement reads.
type masterStats struct {
	cpu                 float64 // used_cpu_sys + used_cpu_user, seconds
	publish, spublish   int64   // calls
	busPublishReceived  int64   // cluster_stats_messages_publish_received
	busPublishShardRecv int64   // cluster_stats_messages_publishshard_received
}

func readMasterStats(ctx context.Context, t *testing.T, addr string, cluster bool) masterStats {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	fields := map[string]string{}
	sections := []string{"cpu", "commandstats"}
	for _, sec := range sections {
		info, err := c.Info(ctx, sec).Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = v
			}
		}
	}
	if cluster {
		info, err := c.ClusterInfo(ctx).Result()
		require.NoError(t, err)
		for _, line := range strings.Split(info, "\r\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				fields[k] = v
			}
		}
	}
	f := func(k string) float64 { v, _ := strconv.ParseFloat(fields[k], 64); return v }
	i := func(k string) int64 { v, _ := strconv.ParseInt(fields[k], 10, 64); return v }
	calls := func(cmd string) int64 {
		v := fields["cmdstat_"+cmd]
		v, _ = strings.CutPrefix(v, "calls=")
		n, _ := strconv.ParseInt(v[:max(strings.IndexByte(v, ','), 0)], 10, 64)
		return n
	}
	return masterStats{
		cpu:                 f("used_cpu_sys") + f("used_cpu_user"),
		publish:             calls("publish"),
		spublish:            calls("spublish"),
		busPublishReceived:  i("cluster_stats_messages_publish_received"),
		busPublishShardRecv: i("cluster_stats_messages_publishshard_received"),
	}
}

// pubsubRun is what one mode measured.
type pubsubRun struct {
	mode       string
	masters    int
	messages   int
	took       time.Duration
	deliveries int64
	per        []masterStats // per master: after - before
}

// measurePubSub publishes messages to rooms channels spread over slots from
// 8 goroutines, with 3 subscriber Buses subscribed to every room, and waits
// until every subscriber got every message.
func measurePubSub(t *testing.T, r *redistest.Redis, masters []string, sharded bool, rooms, messages int) pubsubRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster := r.Kind == redistest.Clusters
	ks := keyspace.New(r.Prefix)
	var chans []string
	for i := range rooms {
		chans = append(chans, ks.Key("lobby", fmt.Sprintf("l%d", i), "events")+":1")
	}
	var got atomic.Int64
	var stops []func()
	for n := range 3 {
		b := bus.New(r.NewClient(t), bus.Config{Node: fmt.Sprintf("m%d", n), Prefix: r.Prefix, Sharded: sharded})
		stops = append(stops, b.Start(ctx))
		for _, ch := range chans {
			_, err := b.SubscribeSharded(ctx, ch, bus.HandlerFuncs{OnReceive: func(string, []byte) { got.Add(1) }})
			require.NoError(t, err)
		}
	}
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	pub := bus.New(r.NewClient(t), bus.Config{Node: "pub", Prefix: r.Prefix, Sharded: sharded})
	payload := `{"type":"message","message":{"id":"1796114764962-000001","room":"lobby-1","from":"alice","text":"` +
		strings.Repeat("x", 120) + `","ts":"2026-11-30T12:00:00.000Z"}}`
	before := make([]masterStats, len(masters))
	for i, a := range masters {
		before[i] = readMasterStats(ctx, t, a, cluster)
	}
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := next.Add(1) - 1
				if k >= int64(messages) {
					return
				}
				assert.NoError(t, pub.PublishSharded(ctx, chans[k%int64(len(chans))], payload))
			}
		}()
	}
	wg.Wait()
	want := int64(3 * messages)
	require.Eventually(t, func() bool { return got.Load() >= want }, 60*time.Second, 5*time.Millisecond,
		"deliveries: %d of %d", got.Load(), want)
	took := time.Since(start)
	run := pubsubRun{mode: map[bool]string{false: "classic", true: "sharded"}[sharded], masters: len(masters),
		messages: messages, took: took, deliveries: got.Load()}
	for i, a := range masters {
		after := readMasterStats(ctx, t, a, cluster)
		run.per = append(run.per, masterStats{
			cpu:                 after.cpu - before[i].cpu,
			publish:             after.publish - before[i].publish,
			spublish:            after.spublish - before[i].spublish,
			busPublishReceived:  after.busPublishReceived - before[i].busPublishReceived,
			busPublishShardRecv: after.busPublishShardRecv - before[i].busPublishShardRecv,
		})
	}
	return run
}

func (p pubsubRun) row() string {
	var cpu, pubs, bus []string
	for _, m := range p.per {
		cpu = append(cpu, fmt.Sprintf("%.1f", m.cpu*1e6/float64(p.messages)))
		pubs = append(pubs, strconv.FormatInt(m.publish+m.spublish, 10))
		bus = append(bus, strconv.FormatInt(m.busPublishReceived+m.busPublishShardRecv, 10))
	}
	return fmt.Sprintf("| %s | %d | %d | %s | %s | %s | %.0f |", p.mode, p.masters, p.messages,
		strings.Join(cpu, " / "), strings.Join(pubs, " / "), strings.Join(bus, " / "),
		float64(p.deliveries)/p.took.Seconds())
}

func TestClusterPubSubClassicVsSharded(t *testing.T) {
	skipShort(t)
	messages := 3000
	if n, err := strconv.Atoi(os.Getenv("CHATD_PUBSUB_MESSAGES")); err == nil && n > 0 {
		messages = n
	}
	const rooms = 60
	r := redistest.OwnCluster(t, redistest.ClusterOptions{})
	masters := []string{r.Nodes[0].Addr, r.Nodes[1].Addr, r.Nodes[2].Addr}
	classic := measurePubSub(t, r, masters, false, rooms, messages)
	sharded := measurePubSub(t, r, masters, true, rooms, messages)
	single := redistest.Own(t, redistest.Options{})
	one := measurePubSub(t, single, []string{single.Addrs[0]}, false, rooms, messages)

	t.Logf("| pub/sub | masters | messages | master CPU µs per message (each master) | PUBLISH+SPUBLISH calls (each) | cluster-bus publish msgs received (each) | deliveries/s |")
	t.Logf("|---|---|---|---|---|---|---|")
	for _, run := range []pubsubRun{classic, sharded, one} {
		t.Logf("%s", run.row())
	}

	for i, m := range classic.per {
		// Every master but the one a message was published on receives it
		// over the cluster bus.
		assert.Greater(t, m.busPublishReceived, int64(messages)/3, "classic: master %d gets other masters' messages over the bus", i)
	}
	var spub int64
	for i, m := range sharded.per {
		// only the Buses' canaries (classic, one a second each) cross it
		assert.Less(t, m.busPublishReceived+m.busPublishShardRecv, int64(messages)/20, "sharded without replicas: messages stay off the cluster bus (master %d)", i)
		assert.Positive(t, m.spublish, "sharded: rooms on every master (master %d)", i)
		spub += m.spublish
	}
	assert.EqualValues(t, messages, spub, "sharded: one SPUBLISH per message, on the room's master")
}
