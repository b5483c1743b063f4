package web

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
)

// shortTimeouts gives each node a client that fails fast while Redis is
// away, as cmd/chatd configures it.
var shortTimeouts = nodeOpts{configure: func(cfg *Config) {
	o := cfg.Redis.(*redis.Client).Options()
	cfg.Redis = redis.NewClient(&redis.Options{
		Addr: o.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: 1, ContextTimeoutEnabled: true,
	})
}}

// chatter sends numbered messages with refs and remembers which were acked.
type chatter struct {
	w     *wsClient
	room  string
	mu    sync.Mutex
	acked map[string]string // ref -> message id
}

func TestNoAckedMessageLostAcrossPubSubKillAndRedisRestart(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{AOF: true})
	c := newCluster(t, r, 3, shortTimeouts)
	c.putSetting("rate.messages_per_second", 1000)

	const members = 6
	var ws []*wsClient
	room := ""
	for i := 0; i < members; i++ {
		w := c.dial(c.nodes[i%3], fmt.Sprintf("m%d", i))
		got := w.join("faults")
		if room == "" {
			room = got
		}
		require.Equal(t, room, got)
		ws = append(ws, w)
	}

	// Each member's frames are read by a collector that records message ids
	// and acks.
	type inbox struct {
		mu    sync.Mutex
		ids   []string
		acked map[string]string
	}
	missing := func(b *inbox, acked []string) []string {
		b.mu.Lock()
		defer b.mu.Unlock()
		have := map[string]bool{}
		for _, id := range b.ids {
			have[id] = true
		}
		var out []string
		for _, id := range acked {
			if !have[id] {
				out = append(out, id)
			}
		}
		return out
	}
	boxes := make([]*inbox, members)
	stopRead := make(chan struct{})
	var readers sync.WaitGroup
	for i, w := range ws {
		boxes[i] = &inbox{acked: map[string]string{}}
		readers.Add(1)
		go func(b *inbox, w *wsClient) {
			defer readers.Done()
			for {
				select {
				case f := <-w.frames:
					b.mu.Lock()
					switch f["type"] {
					case "message":
						id, _ := msgOf(f)
						b.ids = append(b.ids, id)
					case "ack":
						b.acked[f["ref"].(string)] = f["id"].(string)
					}
					b.mu.Unlock()
				case <-stopRead:
					return
				}
			}
		}(boxes[i], w)
	}

	// Senders: two members send a message every 10 ms through all phases.
	stopSend := make(chan struct{})
	var senders sync.WaitGroup
	for _, i := range []int{0, 4} {
		senders.Add(1)
		go func(i int) {
			defer senders.Done()
			for k := 0; ; k++ {
				select {
				case <-stopSend:
					return
				case <-time.After(10 * time.Millisecond):
				}
				ref := fmt.Sprintf("%d-%d", i, k)
				if err := ws[i].conn.WriteJSON(map[string]string{"type": "say", "room": room, "text": ref, "ref": ref}); err != nil {
					return
				}
			}
		}(i)
	}

	ctx := context.Background()
	time.Sleep(300 * time.Millisecond)
	killed, err := r.Client.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, killed, int64(3), "every node's pub/sub connection")
	time.Sleep(500 * time.Millisecond)
	r.Server.Restart(t) // AOF: the history survives; connections do not
	time.Sleep(1500 * time.Millisecond)
	close(stopSend)
	senders.Wait()

	// Every acked message reaches every member, once each, in one order.
	var acked []string
	for _, i := range []int{0, 4} {
		boxes[i].mu.Lock()
		for _, id := range boxes[i].acked {
			acked = append(acked, id)
		}
		boxes[i].mu.Unlock()
	}
	require.Greater(t, len(acked), 50, "messages were acked through the faults")
	for i, b := range boxes {
		assert.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			have := map[string]bool{}
			for _, id := range b.ids {
				have[id] = true
			}
			for _, id := range acked {
				if !have[id] {
					return false
				}
			}
			return true
		}, 20*time.Second, 20*time.Millisecond, "member %d misses acked messages: %v", i, missing(b, acked))
	}
	close(stopRead)
	readers.Wait()
	for i, b := range boxes {
		seen := map[string]bool{}
		for k, id := range b.ids {
			assert.False(t, seen[id], "member %d got %s twice", i, id)
			seen[id] = true
			if k > 0 {
				assert.Less(t, b.ids[k-1], id, "member %d: order", i)
			}
		}
	}
	gaps := 0.0
	for _, n := range c.nodes {
		gaps += counterValue(t, n.srv, "chatd_room_gap_fills_total")
	}
	assert.Greater(t, gaps, 0.0, "the nodes filled gaps after reconnecting")
}

func TestSlowClientIsDroppedAndOthersGetEverything(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	c := newCluster(t, r, 1)
	c.putSetting("rate.messages_per_second", 10000)
	c.putSetting("message.max_length", 16000)

	sender := c.dial(c.nodes[0], "sender")
	room := sender.join("slow")
	fast := c.dial(c.nodes[0], "fast")
	require.Equal(t, room, fast.join("slow"))

	// The slow client joins and then never reads.
	tok := c.session(c.nodes[0], "slow")
	u := "ws" + strings.TrimPrefix(c.nodes[0].url, "http") + "/ws?token=" + tok
	slow, _, err := websocket.DefaultDialer.Dial(u, nil)
	require.NoError(t, err)
	defer slow.Close()
	require.NoError(t, slow.WriteJSON(map[string]string{"type": "join", "lobby": "slow"}))

	big := strings.Repeat("x", 15000)
	const n = 1000
	go func() {
		for k := 0; k < n; k++ {
			if sender.conn.WriteJSON(map[string]string{"type": "say", "room": room, "text": fmt.Sprint(k, big)}) != nil {
				return
			}
		}
	}()
	got := 0
	for got < n {
		fast.next("message")
		got++
	}
	assert.Equal(t, n, got, "the fast member got every message")
	require.Eventually(t, func() bool { return counterValue(t, c.nodes[0].srv, "chatd_ws_slow_clients_total") >= 1 },
		10*time.Second, 20*time.Millisecond, "the slow client was dropped")

	// Reading now, the slow client finds the close code after what was queued.
	_ = slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := slow.ReadMessage()
		if err == nil {
			continue
		}
		// 1013 when the close frame fits in the socket buffers; when they
		// are full the server can only cut the connection (1006).
		var ce *websocket.CloseError
		require.True(t, asClose(err, &ce), "the connection is closed: %v", err)
		assert.Contains(t, []int{realtime.CloseTryLater, websocket.CloseAbnormalClosure}, ce.Code)
		break
	}
}

func TestGoroutinesReturnToBaselineAfterManyConnections(t *testing.T) {
	r := redistest.New(t)
	c := newCluster(t, r, 1)
	tok := c.session(c.nodes[0], "churn")
	// warm up: one connection that joins, so pools and subscriptions exist
	w := dialToken(t, c.nodes[0], "churn", tok)
	w.join("churn")
	_ = w.conn.Close()
	time.Sleep(200 * time.Millisecond)
	base := runtime.NumGoroutine()

	u := "ws" + strings.TrimPrefix(c.nodes[0].url, "http") + "/ws?token=" + tok
	for i := 0; i < 1000; i++ {
		conn, _, err := websocket.DefaultDialer.Dial(u, nil)
		require.NoError(t, err)
		_, _, err = conn.ReadMessage() // hello
		require.NoError(t, err)
		if i%10 == 0 {
			require.NoError(t, conn.WriteJSON(map[string]string{"type": "join", "lobby": "churn"}))
			for {
				_, p, err := conn.ReadMessage()
				require.NoError(t, err)
				if strings.Contains(string(p), `"joined"`) {
					break
				}
			}
		}
		require.NoError(t, conn.Close())
	}
	require.Eventually(t, func() bool { return c.nodes[0].srv.node.Hub().Count() == 0 }, 15*time.Second, 20*time.Millisecond,
		"every connection is unregistered")
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= base+5 }, 15*time.Second, 50*time.Millisecond,
		"goroutines: baseline %d, now %d", base, runtime.NumGoroutine())
}

func TestShutdownTellsClientsToReconnectAndFreesSeats(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	c := newCluster(t, r, 2)
	a := c.dial(c.nodes[0], "leaver")
	room := a.join("drain")
	b := c.dial(c.nodes[1], "stayer")
	require.Equal(t, room, b.join("drain"))

	c.nodes[0].stop()
	<-a.closed
	assert.Equal(t, realtime.CloseServiceReboot, a.closeCode())
	left := b.next("presence")
	assert.Equal(t, "leaver", left["user"])
	assert.Equal(t, "left", left["state"], "the seat is freed at once, not after the lease")

	var out struct{ Room struct{ Members []string } }
	tok := c.session(c.nodes[1], "stayer")
	require.Equal(t, 200, c.do(c.nodes[1], "GET", "/api/v1/rooms/"+room, tok, nil, &out))
	assert.Equal(t, []string{"stayer"}, out.Room.Members)
}

func TestNoticesAndSettingsReachEveryClientOnce(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	c := newCluster(t, r, 2)
	a := c.dial(c.nodes[0], "ann")
	b := c.dial(c.nodes[1], "ben")

	c.putSetting("motd", "welcome: be kind")
	for _, w := range []*wsClient{a, b} {
		f := w.next("settings")
		assert.Equal(t, "motd", f["key"])
		assert.Equal(t, "welcome: be kind", f["value"])
	}
	var posted struct{ ID string }
	require.Equal(t, 200, c.do(c.nodes[0], "POST", "/api/v1/notices", testAdmin, map[string]string{"text": "maintenance at noon"}, &posted))
	for _, w := range []*wsClient{a, b} {
		f := w.next("notice")
		assert.Equal(t, posted.ID, f["id"])
		assert.Equal(t, "maintenance at noon", f["text"])
	}

	// A user who was offline gets it on connect, once.
	late := c.dial(c.nodes[1], "late")
	f := late.next("notice")
	assert.Equal(t, posted.ID, f["id"])
	_ = late.conn.Close()
	again := c.dial(c.nodes[0], "late")
	again.send(map[string]string{"type": "ping"})
	assert.Equal(t, "pong", again.nextOf("pong", "notice")["type"], "a seen notice is not shown again")

	// ann saw it live: she does not get it again either
	_ = a.conn.Close()
	a2 := c.dial(c.nodes[1], "ann")
	a2.send(map[string]string{"type": "ping"})
	assert.Equal(t, "pong", a2.nextOf("pong", "notice")["type"])

	// The motd is in hello for new connections.
	tok := c.session(c.nodes[0], "newbie")
	u := "ws" + strings.TrimPrefix(c.nodes[0].url, "http") + "/ws?token=" + tok
	conn, _, err := websocket.DefaultDialer.Dial(u, nil)
	require.NoError(t, err)
	defer conn.Close()
	var hello map[string]any
	require.NoError(t, conn.ReadJSON(&hello))
	assert.Equal(t, "welcome: be kind", hello["motd"])
	assert.Equal(t, "n1", hello["node"])
}

// counterValue reads a counter of the node's registry.
func counterValue(t testing.TB, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.cfg.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.Counter != nil {
				total += m.Counter.GetValue()
			}
		}
	}
	return total
}
