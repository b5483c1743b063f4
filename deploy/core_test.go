package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
)

// The realtime core's acceptance tests on real chatd processes: a rolling
// restart and a paused node must cost no seat and no message.

// peer is a WebSocket client of one given node (not through the balancer):
// it records every message id it gets, in order, and every other frame.
type peer struct {
	t    *testing.T
	user string
	tok  string
	ws   *wsclient.Conn
	node string

	mu     sync.Mutex
	ids    []string            // message ids, in arrival order
	frames map[string][]frame  // other frames by type
	closed chan struct{}       // the read loop ended
	code   int                 // close code seen
	acks   map[string]string   // ref → id
	errs   map[string][]string // code → refs
}

func dialPeer(ctx context.Context, t *testing.T, addr, user, tok string) *peer {
	t.Helper()
	p := &peer{t: t, user: user, tok: tok}
	require.NoError(t, p.dial(ctx, addr))
	t.Cleanup(func() { _ = p.ws.Close() })
	return p
}

func (p *peer) dial(ctx context.Context, addr string) error {
	u := url.URL{Scheme: "ws", Host: addr, Path: "/ws", RawQuery: "token=" + url.QueryEscape(p.tok)}
	ws, resp, err := wsclient.Dial(ctx, u.String(), &wsclient.Options{Dialer: &websocket.Dialer{HandshakeTimeout: 5 * time.Second}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return fmt.Errorf("%s: dial %s: %w", p.user, addr, err)
	}
	p.mu.Lock()
	p.ws, p.closed, p.code = ws, make(chan struct{}), 0
	if p.frames == nil {
		p.frames, p.acks, p.errs = map[string][]frame{}, map[string]string{}, map[string][]string{}
	}
	n := len(p.frames["hello"])
	p.mu.Unlock()
	go p.read(ws, p.closed)
	hello := p.wait(ctx, "hello", n+1)
	p.node = hello[n].Node
	return nil
}

// read takes the events of one connection (internal/wsclient reads and
// decodes them) and records them.
func (p *peer) read(ws *wsclient.Conn, closed chan struct{}) {
	defer close(closed)
	for ev := range ws.Events() {
		if ev.ServerEvent == nil {
			p.t.Errorf("%s: undecodable frame %q: %v", p.user, ev.Raw, ws.Bad())
			continue
		}
		var f frame
		_ = json.Unmarshal(ev.Raw, &f)
		p.mu.Lock()
		switch e := ev.ServerEvent.(type) {
		case protocol.MessageEvent:
			p.ids = append(p.ids, e.Message.ID)
		case protocol.Ack:
			p.acks[e.Ref] = e.ID
		case protocol.ErrorEvent:
			p.errs[string(e.Code)] = append(p.errs[string(e.Code)], e.Ref)
			p.frames[f.Type] = append(p.frames[f.Type], f)
		default:
			p.frames[f.Type] = append(p.frames[f.Type], f)
		}
		p.mu.Unlock()
	}
	p.mu.Lock()
	p.code = ws.CloseCode()
	p.mu.Unlock()
}

// wait waits for n frames of type typ in all and returns them.
func (p *peer) wait(ctx context.Context, typ string, n int) []frame {
	p.t.Helper()
	var out []frame
	require.Eventually(p.t, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		out = slices.Clone(p.frames[typ])
		return len(out) >= n || ctx.Err() != nil
	}, 30*time.Second, 5*time.Millisecond, "%s: waiting for %d %q frames; have %v", p.user, n, typ, p.dump())
	return out
}

func (p *peer) dump() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("frames %v, %d messages, code %d", p.frames, len(p.ids), p.code)
}

func (p *peer) send(f protocol.ClientFrame) {
	p.t.Helper()
	require.NoError(p.t, p.ws.Send(f), p.user)
}

func (p *peer) messages() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ids)
}

// join joins lobby and returns the room id.
func (p *peer) join(ctx context.Context, lobby string) string {
	p.t.Helper()
	n := p.count("joined")
	p.send(protocol.Join{Lobby: lobby})
	j := p.wait(ctx, "joined", n+1)
	var r roomInfo
	require.NoError(p.t, json.Unmarshal(j[n].Room, &r))
	return r.ID
}

func (p *peer) count(typ string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.frames[typ])
}

// ids returns the acked ids of refs.
func (p *peer) acked(refs []string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, r := range refs {
		if id, ok := p.acks[r]; ok {
			out = append(out, id)
		}
	}
	return out
}

// checkOnceInOrder asserts that got holds want exactly once each, in
// order, with nothing else of want's range in between.
func checkOnceInOrder(t *testing.T, who string, got, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	var missing, dup []string
	for _, id := range want {
		switch seen[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			dup = append(dup, id)
		}
	}
	assert.Empty(t, missing, "%s: %d of %d messages missing", who, len(missing), len(want))
	assert.Empty(t, dup, "%s: delivered twice", who)
	assert.True(t, slices.IsSorted(got), "%s: out of order", who)
}

func rounds(def int) int {
	if n, err := strconv.Atoi(os.Getenv("CHATD_E2E_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return def
}

// TestRollingRestartKeepsEverySeat: five WebSocket users on one node that
// gets SIGTERM are closed with 1012, reconnect at once to the other nodes
// and resume; each of them is listed exactly once in the room and gets
// every later message. Repeated over the nodes, CHATD_E2E_ROUNDS times
// (default 5; the closing note reports 20).
func TestRollingRestartKeepsEverySeat(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c.setSetting(ctx, "rate.messages_per_second", 1000)
	c.setSetting(ctx, "seat.lease_seconds", 6) // renewals every 2 s
	obs := dialPeer(ctx, t, c.nodes[2].addr(), "observer", c.session(ctx, "observer"))
	room := obs.join(ctx, "restart")
	for round := range rounds(5) {
		victim := c.nodes[round%2] // n1, n2 in turn; the observer stays on n3
		others := []*node{c.nodes[(round+1)%2], c.nodes[2]}
		var users []*peer
		for i := range 5 {
			u := fmt.Sprintf("r%du%d", round, i)
			p := dialPeer(ctx, t, victim.addr(), u, c.session(ctx, u))
			require.Equal(t, room, p.join(ctx, "restart"))
			users = append(users, p)
		}

		victim.p.signal(syscall.SIGTERM)
		var wg sync.WaitGroup
		for i, p := range users {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-p.closed
				assert.Equal(t, 1012, p.code, "%s: closed with 1012", p.user)
				last := ""
				if ids := p.messages(); len(ids) > 0 {
					last = ids[len(ids)-1]
				}
				// reconnect at once to another node and resume
				assert.NoError(t, p.dial(ctx, others[i%2].addr()))
				n := p.count("joined")
				p.send(protocol.Resume{Room: room, After: last})
				p.wait(ctx, "joined", n+1)
			}()
		}
		wg.Wait()
		done, _ := victim.p.wait(15 * time.Second)
		require.True(t, done, "round %d: the drained node exits", round)

		// every user is listed once, now and after a renewal period
		want := []string{"observer"}
		for _, p := range users {
			want = append(want, p.user)
		}
		for _, after := range []time.Duration{0, 5 * time.Second} {
			time.Sleep(after)
			r, err := c.room(ctx, obs.tok, room)
			require.NoError(t, err)
			for _, u := range want {
				assert.Equal(t, 1, countOf(r.Members, u), "round %d (+%s): %s listed once in %v", round, after, u, r.Members)
			}
		}
		// every later message reaches every resumed user
		var refs []string
		for k := range 20 {
			ref := fmt.Sprintf("r%d-%d", round, k)
			refs = append(refs, ref)
			obs.send(protocol.Say{Room: room, Text: ref, Ref: ref})
		}
		require.Eventually(t, func() bool { return len(obs.acked(refs)) == len(refs) }, 20*time.Second, 10*time.Millisecond,
			"the observer's says are acked: %s", obs.dump())
		sent := obs.acked(refs)
		for _, p := range users {
			require.Eventually(t, func() bool { return containsAll(p.messages(), sent) }, 20*time.Second, 10*time.Millisecond,
				"round %d: %s (on %s) got every later message", round, p.user, p.node)
			checkOnceInOrder(t, p.user, p.messages(), sent)
			p.mu.Lock()
			assert.Empty(t, p.errs, "round %d: %s got errors", round, p.user)
			p.mu.Unlock()
			_ = p.ws.Close()
		}
		c.start(victim) // back for the next round
	}
}

func countOf(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

func containsAll(got, want []string) bool {
	set := map[string]bool{}
	for _, id := range got {
		set[id] = true
	}
	for _, id := range want {
		if !set[id] {
			return false
		}
	}
	return true
}

// TestPausedNodeDeliversItsBacklog: a node SIGSTOPped for 3 s while 2,000
// messages go to its room from another node; once it goes on, its members
// get all 2,000, once, in order, and none is closed (a backlog is not a
// slow client).
func TestPausedNodeDeliversItsBacklog(t *testing.T) {
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c.setSetting(ctx, "rate.messages_per_second", 10000)
	paused, other := c.nodes[0], c.nodes[1]
	sender := dialPeer(ctx, t, other.addr(), "sender", c.session(ctx, "sender"))
	room := sender.join(ctx, "backlog")
	var members []*peer
	for i := range 5 {
		u := fmt.Sprintf("m%d", i)
		p := dialPeer(ctx, t, paused.addr(), u, c.session(ctx, u))
		require.Equal(t, room, p.join(ctx, "backlog"))
		members = append(members, p)
	}
	const n = 2000
	paused.p.signal(syscall.SIGSTOP)
	stopped := time.Now()
	var refs []string
	for k := range n {
		ref := "b" + strconv.Itoa(k)
		refs = append(refs, ref)
		sender.send(protocol.Say{Room: room, Text: ref, Ref: ref})
	}
	require.Eventually(t, func() bool { return len(sender.acked(refs)) == n }, 60*time.Second, 10*time.Millisecond, "all says acked")
	time.Sleep(time.Until(stopped.Add(3 * time.Second)))
	paused.p.signal(syscall.SIGCONT)
	sent := sender.acked(refs)
	for _, p := range members {
		require.Eventually(t, func() bool { return containsAll(p.messages(), sent) }, 60*time.Second, 20*time.Millisecond,
			"%s got the backlog (%d of %d)", p.user, len(p.messages()), n)
		checkOnceInOrder(t, p.user, p.messages(), sent)
		select {
		case <-p.closed:
			t.Errorf("%s was closed (%d)", p.user, p.code)
		default:
		}
	}
	// the node serves normally afterwards
	status, err := c.do(ctx, paused.addr(), http.MethodGet, "/readyz", "", nil, nil)
	require.NoError(t, err)
	assert.Equal(t, 200, status)
}
