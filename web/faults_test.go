package web

import (
	"context"
	"fmt"
	"regexp"
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
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
)

// shortTimeouts gives each node a client that fails fast while Redis is
// away, as cmd/chatd configures it.
var shortTimeouts = nodeOpts{configure: func(cfg *nodeConfig) {
	o := cfg.Redis.(*redis.Client).Options()
	cfg.Redis = redis.NewClient(&redis.Options{
		Addr: o.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: 1, ContextTimeoutEnabled: true,
	})
}}

// inbox collects what one member's connection receives: message ids in
// arrival order, acks by ref, and error frames by code.
type inbox struct {
	mu     sync.Mutex
	ids    []string
	acked  map[string]string // ref → message id
	errors map[string]int    // error code → count
}

func (b *inbox) ackCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.acked)
}

// missing returns the ids of acked that b did not receive.
func (b *inbox) missing(acked []string) []string {
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

// messageID is the form of a message id: string order is id order only
// because both parts are zero-padded.
var messageID = regexp.MustCompile(`^[0-9]{13}-[0-9]{6}$`)

// faultCodes are the error codes a say may get while Redis is away or
// restarting; any other fails the test.
var faultCodes = map[string]bool{"redis_unavailable": true}

// TestNoAckedMessageLostAcrossPubSubKillAndRedisRestart: two members say a
// line every 10 ms through three phases, each ended by progress (every
// sender got 20 more acks), not by a clock: before the faults, after every
// node's pub/sub connection was killed, and after Redis restarted (AOF:
// the history survives, connections do not). Every node fills the gap
// after each fault; says refused meanwhile may only be redis_unavailable;
// the WebSocket connections survive both faults (none is closed, none
// resumed); every acked message reaches every member once, in order.
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

	boxes := make([]*inbox, members)
	stopRead := make(chan struct{})
	var readers sync.WaitGroup
	for i, w := range ws {
		boxes[i] = &inbox{acked: map[string]string{}, errors: map[string]int{}}
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
						ref, _ := f["ref"].(string)
						id, _ := f["id"].(string)
						b.acked[ref] = id
					case "error":
						code, _ := f["code"].(string)
						b.errors[code]++
					}
					b.mu.Unlock()
				case <-stopRead:
					return
				}
			}
		}(boxes[i], w)
	}

	// Senders: two members, on two nodes, say a line every 10 ms through
	// all phases; a write that fails is a lost connection, reported.
	senders := []int{0, 4}
	stopSend := make(chan struct{})
	writeErrs := make(chan error, len(senders))
	var sending sync.WaitGroup
	for _, i := range senders {
		sending.Add(1)
		go func() {
			defer sending.Done()
			for k := 0; ; k++ {
				select {
				case <-stopSend:
					return
				case <-time.After(10 * time.Millisecond):
				}
				ref := fmt.Sprintf("%d-%d", i, k)
				if err := ws[i].conn.WriteJSON(map[string]string{"type": "say", "room": room, "text": ref, "ref": ref}); err != nil {
					writeErrs <- fmt.Errorf("sender m%d, say %d: %w", i, k, err)
					return
				}
			}
		}()
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(stopSend)
			sending.Wait()
		}
	}
	defer stop()

	// progress waits until every sender got 20 more acks.
	progress := func(phase string) {
		t.Helper()
		for _, i := range senders {
			from := boxes[i].ackCount()
			require.Eventually(t, func() bool { return boxes[i].ackCount() >= from+20 }, 30*time.Second, 10*time.Millisecond,
				"%s: sender m%d stalled at %d acks (errors %v)", phase, i, from, boxes[i].errors)
		}
	}
	gapFills := func() []float64 {
		var out []float64
		for _, n := range c.nodes {
			out = append(out, counterValue(t, n.srv, "chatd_room_gap_fills_total"))
		}
		return out
	}
	// filled waits until every node ran a gap fill since before.
	filled := func(phase string, before []float64) {
		t.Helper()
		for k, n := range c.nodes {
			require.Eventually(t, func() bool { return counterValue(t, n.srv, "chatd_room_gap_fills_total") > before[k] },
				30*time.Second, 10*time.Millisecond, "%s: %s filled no gap", phase, n.srv.Node())
		}
	}

	ctx := context.Background()
	progress("before the faults")
	fills := gapFills()
	killed, err := r.Client.ClientKillByFilter(ctx, "TYPE", "pubsub").Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, killed, int64(3), "every node's pub/sub connection")
	filled("after the pub/sub kill", fills)
	progress("after the pub/sub kill")

	fills = gapFills()
	r.Server.Restart(t) // AOF: the history survives; connections do not
	filled("after the restart", fills)
	progress("after the restart")
	stop()
	close(writeErrs)
	for err := range writeErrs {
		t.Errorf("a sender's connection broke: %v", err)
	}

	t.Run("the connections survived both faults", func(t *testing.T) {
		for i, w := range ws {
			select {
			case <-w.closed:
				t.Errorf("member %d's connection closed (code %d)", i, w.closeCode())
			default:
			}
		}
	})

	// Every acked message reaches every member, once each, in one order.
	var acked []string
	for _, i := range senders {
		boxes[i].mu.Lock()
		for _, id := range boxes[i].acked {
			acked = append(acked, id)
		}
		boxes[i].mu.Unlock()
	}
	for i, b := range boxes {
		assert.Eventually(t, func() bool { return len(b.missing(acked)) == 0 }, 30*time.Second, 20*time.Millisecond,
			"member %d misses acked messages: %v", i, b.missing(acked))
	}
	close(stopRead)
	readers.Wait()
	t.Logf("%d messages acked", len(acked))
	for i, b := range boxes {
		seen := map[string]bool{}
		for k, id := range b.ids {
			require.Regexp(t, messageID, id, "member %d: a message id", i)
			assert.False(t, seen[id], "member %d got %s twice", i, id)
			seen[id] = true
			if k > 0 {
				assert.Less(t, b.ids[k-1], id, "member %d: order", i)
			}
		}
		for code, n := range b.errors {
			t.Logf("member %d: %d error frames %s", i, n, code)
			assert.True(t, faultCodes[code], "member %d: %d error frames %s, not a code a fault may cause", i, n, code)
		}
	}
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

	// The slow client joins and then never reads: a raw socket on purpose
	// (the test client, internal/wsclient, reads in the background).
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
		require.ErrorAs(t, err, &ce, "the connection is closed")
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

	// raw sockets on purpose: the test counts goroutines, and the test
	// client's background reader would be one per connection
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
	require.Eventually(t, func() bool { return c.nodes[0].node.Core.Clients() == 0 }, 15*time.Second, 20*time.Millisecond,
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
	again.send(protocol.Ping{})
	assert.Equal(t, "pong", again.nextOf("pong", "notice")["type"], "a seen notice is not shown again")

	// ann saw it live: she does not get it again either
	_ = a.conn.Close()
	a2 := c.dial(c.nodes[1], "ann")
	a2.send(protocol.Ping{})
	assert.Equal(t, "pong", a2.nextOf("pong", "notice")["type"])

	// The motd is in hello for new connections.
	nw, _, err := openWS(t, "newbie", wsURL(c.nodes[0], c.session(c.nodes[0], "newbie")), nil)
	require.NoError(t, err)
	hello := nw.next("hello")
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
