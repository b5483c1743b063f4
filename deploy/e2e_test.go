package deploy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// End-to-end tests on real processes: three chatd nodes on a private
// redis-server behind nginx (deploy/nginx.conf as cluster.sh renders it).
// Clients speak only HTTP and WebSocket to nginx, as docs/PROTOCOL.md describes;
// the tests reach a node directly only to check that a setting arrived.

const members = 6 // two per node under least_conn

// joinAll connects n members through the balancer one after another, so
// least_conn spreads them over the nodes, and seats them all in lobby.
func joinAll(ctx context.Context, t *testing.T, c *cluster, prefix, lobby string, n int) ([]*member, roomInfo) {
	t.Helper()
	var ms []*member
	var room roomInfo
	for i := 0; i < n; i++ {
		m := newMember(ctx, c, fmt.Sprintf("%s%d", prefix, i))
		require.NoError(t, m.connect(ctx))
		r, err := m.join(ctx, lobby)
		require.NoError(t, err)
		if i == 0 {
			room = r
		}
		require.Equal(t, room.ID, r.ID, "%s was seated apart from the others", m.user)
		ms = append(ms, m)
	}
	return ms, room
}

// byNode groups members by the node their connection landed on.
func byNode(ms []*member) map[string][]*member {
	out := map[string][]*member{}
	for _, m := range ms {
		out[m.node()] = append(out[m.node()], m)
	}
	return out
}

// allAcked is every id acked to any of ms.
func allAcked(ms []*member) []string {
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.ackedIDs()...)
	}
	sort.Strings(ids)
	return ids
}

func totalAcks(ms []*member) int {
	n := 0
	for _, m := range ms {
		n += m.ackCount()
	}
	return n
}

// chatAll runs chat for each member in its own goroutine; wait returns the
// first error.
func chatAll(ctx context.Context, ms []*member, room string, want int, stop <-chan struct{}) (wait func() error) {
	var wg sync.WaitGroup
	errs := make(chan error, len(ms))
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.chat(ctx, room, want, stop, 20*time.Millisecond); err != nil {
				errs <- err
			}
		}()
	}
	return func() error {
		wg.Wait()
		close(errs)
		return <-errs
	}
}

// logRefusals logs how many error frames of each code every member got
// (the retried says: not_seated after a reconnect, while the seat was
// lost in the move and not yet taken back; rate_limited). Retried says are
// never acked, so they cost no message; the counts show how long members
// could not speak. A refused say with another code already failed chat.
func logRefusals(t *testing.T, ms []*member) {
	t.Helper()
	total := map[string]int{}
	for _, m := range ms {
		m.mu.Lock()
		codes := maps.Clone(m.refusals)
		m.mu.Unlock()
		for _, code := range slices.Sorted(maps.Keys(codes)) {
			t.Logf("%s: %d error frames %s", m.user, codes[code], code)
			total[code] += codes[code]
		}
	}
	t.Logf("error frames by code, all members: %v", total)
}

// assertDelivered checks that every member received every acked id, none
// twice, and ids in increasing order.
func assertDelivered(t *testing.T, ms []*member, acked []string) {
	t.Helper()
	require.NotEmpty(t, acked)
	assert.Eventually(t, func() bool {
		for _, m := range ms {
			if len(m.missing(acked)) > 0 {
				return false
			}
		}
		return true
	}, 15*time.Second, 50*time.Millisecond, "some acked messages never arrived")
	for _, m := range ms {
		t.Log(m.summary())
		assert.Empty(t, m.missing(acked), "%s misses acked messages", m.user)
		assert.Empty(t, m.duplicates(), "%s got messages more than once", m.user)
		assert.Empty(t, m.outOfOrder(), "%s got messages out of order", m.user)
	}
}

func TestE2EChatThroughBalancer(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.setSetting(ctx, "rate.messages_per_second", 1000)

	ms, room := joinAll(ctx, t, c, "bal", "balanced", members)
	t.Run("clients land on every node", func(t *testing.T) {
		spread := map[string]int{}
		for node, group := range byNode(ms) {
			spread[node] = len(group)
		}
		assert.Len(t, spread, 3, "members per node: %v", spread)
	})

	t.Run("errors keep chatd's shape through the balancer", func(t *testing.T) {
		tok := ms[0].token
		big := func(n int) map[string]string { return map[string]string{"user": strings.Repeat("a", n)} }
		for _, tc := range []struct {
			name, method, path, token string
			body                      any
			status                    int
			code                      string
		}{
			{"a body over 1 MiB", "POST", "/api/v1/session", "", big(1 << 20), 413, "too_large"},
			{"a 16 KiB header", "GET", "/api/v1/settings", strings.Repeat("x", 16<<10), nil, 431, "too_large"},
			{"an unknown room", "GET", "/api/v1/rooms/nowhere-1", tok, nil, 404, "unknown_room"},
		} {
			status, code := c.errorOf(ctx, tc.method, tc.path, tc.token, tc.body)
			assert.Equal(t, tc.status, status, tc.name)
			assert.Equal(t, tc.code, code, tc.name)
		}
		players := make([]string, 1000)
		for i := range players {
			players[i] = fmt.Sprintf("player-%025d", i) // 32 characters
		}
		_, err := c.do(ctx, c.lb, "POST", "/api/v1/leaderboards/big/ranks", tok, map[string]any{"players": players}, nil)
		assert.NoError(t, err, "a 35 KB body (over nginx's 16 KB buffer) is streamed to the node")
	})

	t.Run("a browser's same-host Origin passes the balancer, another is refused", func(t *testing.T) {
		assert.Equal(t, 101, ms[0].handshake(ctx, "http://"+c.lb))
		assert.Equal(t, 403, ms[0].handshake(ctx, "http://elsewhere.example"))
	})

	require.NoError(t, chatAll(ctx, ms, room.ID, 10, nil)())
	acked := allAcked(ms)
	require.Len(t, acked, members*10)

	t.Run("every member gets every message once, in order", func(t *testing.T) {
		assertDelivered(t, ms, acked)
		for _, m := range ms {
			assert.Equal(t, len(acked), m.received(), "%s got messages nobody sent", m.user)
		}
	})

	t.Run("a REST client's long poll wakes for a message said on any node", func(t *testing.T) {
		tok := c.session(ctx, "poller")
		var joined struct {
			Room roomInfo `json:"room"`
		}
		_, err := c.do(ctx, c.lb, "POST", "/api/v1/lobbies/balanced/join", tok, nil, &joined)
		require.NoError(t, err)
		require.Equal(t, room.ID, joined.Room.ID)
		_, err = c.do(ctx, c.lb, "GET", "/api/v1/poll", tok, nil, nil) // the first poll returns everything
		require.NoError(t, err)

		type pollAnswer struct {
			Dirty []string `json:"dirty"`
			Data  struct {
				Messages map[string][]chatMessage `json:"messages"`
			} `json:"data"`
		}
		poll := func(ctx context.Context, query string) (pollAnswer, error) {
			var a pollAnswer
			_, err := c.do(ctx, c.lb, "GET", "/api/v1/poll"+query, tok, nil, &a)
			return a, err
		}
		// Marks of the join may still be on their way: a long poll must
		// time out clean first, so only the say can wake the parked one.
		quiet := false
		for tries := 0; tries < 10 && !quiet; tries++ {
			a, err := poll(ctx, "?wait=1")
			require.NoError(t, err)
			quiet = len(a.Dirty) == 0
		}
		require.True(t, quiet, "marks kept coming after the join")

		// Parked: the session's long-poll registration is in Redis (the
		// dirty package's waiters key; gone first, as a registration
		// outlives a poll that timed out by a margin).
		waiters := keyspace.New(c.redis.Prefix).Key("session", sessionID(t, tok), "waiters")
		parked := func() bool { return c.redis.Client.Exists(ctx, waiters).Val() == 1 }
		require.Eventually(t, func() bool { return !parked() }, 15*time.Second, 5*time.Millisecond)
		answer := make(chan pollAnswer, 1)
		go func() {
			a, err := poll(ctx, "?wait=30")
			if err != nil {
				a.Dirty = []string{"error: " + err.Error()}
			}
			answer <- a
		}()
		require.Eventually(t, parked, 15*time.Second, 2*time.Millisecond, "the long poll registers as waiting")
		select {
		case a := <-answer:
			t.Fatalf("the long poll answered before the say: %+v", a)
		default:
		}
		id, err := ms[len(ms)-1].say(ctx, room.ID, "for the poller", "poll-1")
		require.NoError(t, err)
		select {
		case a := <-answer:
			assert.Equal(t, []string{"messages"}, a.Dirty, "woken by the say")
			var ids []string
			for _, msg := range a.Data.Messages[room.ID] {
				ids = append(ids, msg.ID)
			}
			assert.Equal(t, []string{id}, ids, "the answer carries the message said")
		case <-time.After(15 * time.Second):
			t.Fatalf("the parked long poll was not woken by message %s within 15s", id)
		}
	})
}

// sessionID is the session id ("sid") inside a session token.
func sessionID(t *testing.T, token string) string {
	t.Helper()
	var cl struct {
		Session string `json:"sid"`
		jwt.RegisteredClaims
	}
	_, err := jwt.ParseWithClaims(token, &cl, func(*jwt.Token) (any, error) { return []byte(testSecret), nil })
	require.NoError(t, err)
	require.NotEmpty(t, cl.Session)
	return cl.Session
}

func TestE2ENodeKilledMidChat(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 75*time.Second)
	defer cancel()
	c.setSetting(ctx, "seat.lease_seconds", 3)
	c.setSetting(ctx, "rate.messages_per_second", 1000)

	ms, room := joinAll(ctx, t, c, "kill", "killed", members)
	// The victim is a node with two members or more: one of them (the
	// ghost) never comes back, so its seat must be freed by the lease; the
	// others reconnect and resume.
	var victim string
	groups := byNode(ms)
	for node, group := range groups {
		if len(group) > len(groups[victim]) {
			victim = node
		}
	}
	require.GreaterOrEqual(t, len(groups[victim]), 2, "no node has two members: %v", groups)
	ghost := groups[victim][0]
	movers := groups[victim][1:]
	var chatters []*member
	for _, m := range ms {
		if m != ghost {
			chatters = append(chatters, m)
		}
	}

	// Chat until stopped; the kill comes once every chatter has 10 acks,
	// and the chat stops once every chatter, movers included, has 15 more
	// after the kill: acked through the node it moved to.
	stop := make(chan struct{})
	wait := chatAll(ctx, chatters, room.ID, 0, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			_ = wait()
		}
	}()
	each := func(n func(*member) int) {
		t.Helper()
		for _, m := range chatters {
			require.Eventually(t, func() bool { return m.ackCount() >= n(m) }, 30*time.Second, 10*time.Millisecond,
				"%s stalled at %d acks, wanted %d: %s", m.user, m.ackCount(), n(m), m.summary())
		}
	}
	each(func(*member) int { return 10 })
	atKill := map[*member]int{}
	for _, m := range chatters {
		atKill[m] = m.ackCount()
	}
	killed := time.Now()
	c.node(victim).p.kill()
	t.Logf("killed %s with -9 after %d acked messages; ghost %s, movers %d", victim, totalAcks(chatters), ghost.user, len(movers))
	each(func(m *member) int { return atKill[m] + 15 })
	close(stop)
	stopped = true
	require.NoError(t, wait())

	t.Run("its clients reconnect through the balancer to other nodes", func(t *testing.T) {
		for _, m := range movers {
			assert.NotEqual(t, victim, m.node(), "%s", m.summary())
		}
	})
	t.Run("nothing acked is missing at any member", func(t *testing.T) {
		assertDelivered(t, chatters, allAcked(chatters))
		logRefusals(t, chatters)
	})
	t.Run("its seats are freed after the lease", func(t *testing.T) {
		want := make([]string, 0, len(chatters))
		for _, m := range chatters {
			want = append(want, m.user)
		}
		sort.Strings(want)
		var got []string
		assert.Eventually(t, func() bool {
			r, err := c.room(ctx, chatters[0].token, room.ID)
			if err != nil {
				return false
			}
			got = append([]string(nil), r.Members...)
			sort.Strings(got)
			return fmt.Sprint(got) == fmt.Sprint(want)
		}, 20*time.Second, 100*time.Millisecond, "members stayed %v, want %v", got, want)
		t.Logf("the ghost's seat was freed %s after the kill (lease 3s)", time.Since(killed).Round(100*time.Millisecond))
		assert.Eventually(t, func() bool {
			for _, m := range chatters {
				if m.sawPresence(room.ID, ghost.user, "left") {
					return true
				}
			}
			return false
		}, 5*time.Second, 50*time.Millisecond, "no member was told that %s left", ghost.user)
	})
}

func TestE2ERollingRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	defer cancel()
	c.setSetting(ctx, "rate.messages_per_second", 1000)

	// One more member than the chatters: a quiet one on the first node to
	// drain, who does not come back, so its seat shows whether draining
	// releases seats at once (the lease is the default 30 s).
	all, room := joinAll(ctx, t, c, "roll", "rolling", members+1)
	first := c.nodes[0]
	var quiet *member
	var ms []*member
	for _, m := range all {
		if quiet == nil && m.node() == first.id {
			quiet = m
			continue
		}
		ms = append(ms, m)
	}
	require.NotNil(t, quiet, "nobody landed on %s", first.id)

	stop := make(chan struct{})
	wait := chatAll(ctx, ms, room.ID, 0, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			_ = wait()
		}
	}()
	progress := func(n int) {
		t.Helper()
		from := totalAcks(ms)
		require.Eventually(t, func() bool { return totalAcks(ms) >= from+n }, 20*time.Second, 10*time.Millisecond,
			"chat stalled at %d acked messages", from)
	}

	for _, n := range c.nodes {
		progress(20)
		start := time.Now()
		n.p.signal(syscall.SIGTERM)
		done, err := n.p.wait(15 * time.Second)
		require.True(t, done, "%s did not exit within 15s of SIGTERM", n.id)
		assert.NoError(t, err, "%s should exit 0 after SIGTERM", n.id)
		t.Logf("%s drained and exited in %s", n.id, time.Since(start).Round(10*time.Millisecond))
		if n == first {
			t.Run("a drained node releases the seats of its clients", func(t *testing.T) {
				var members []string
				assert.Eventually(t, func() bool {
					r, err := c.room(ctx, ms[0].token, room.ID)
					members = r.Members
					return err == nil && !slices.Contains(r.Members, quiet.user)
				}, 5*time.Second, 50*time.Millisecond, "%s still seated: %v", quiet.user, members)
				assert.Equal(t, []int{1012}, quiet.closeCodes())
			})
		}
		c.start(n)
		// The documented procedure: drain the next node only once the
		// balancer sends traffic to this one again.
		c.waitRouted(ctx, n)
	}
	progress(20)
	close(stop)
	stopped = true
	require.NoError(t, wait())

	t.Run("no acked message is missing at any member", func(t *testing.T) {
		assertDelivered(t, ms, allAcked(ms))
		logRefusals(t, ms)
	})
	t.Run("draining nodes close WebSockets with 1012", func(t *testing.T) {
		for _, m := range ms {
			for _, code := range m.closeCodes() {
				assert.Equal(t, 1012, code, "%s", m.summary())
			}
		}
	})
}

func TestE2EChatOnRedisCluster(t *testing.T) {
	t.Parallel()
	skipShort(t)
	nginx := nginxPath(t)
	r := redistest.Cluster(t)
	c := startNodes(t, nginx, r)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.setSetting(ctx, "rate.messages_per_second", 1000)

	// One lobby per master, so seats, history and publishes of the three
	// groups are served by three different masters.
	lobbies := lobbiesOnEveryMaster(ctx, t, r)
	groups := make([][]*member, len(lobbies))
	rooms := make([]string, len(lobbies))
	var ms []*member
	for i := 0; i < members; i++ {
		m := newMember(ctx, c, fmt.Sprintf("cl%d", i))
		require.NoError(t, m.connect(ctx))
		ms = append(ms, m)
	}
	// Sorted by node, member j joins lobby j%3: with two members per node,
	// each lobby has members on two nodes, so its messages cross nodes.
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].node() < ms[j].node() })
	for i, m := range ms {
		g := i % len(lobbies)
		room, err := m.join(ctx, lobbies[g])
		require.NoError(t, err)
		if rooms[g] == "" {
			rooms[g] = room.ID
		}
		require.Equal(t, rooms[g], room.ID)
		groups[g] = append(groups[g], m)
	}
	for g, group := range groups {
		assert.Len(t, byNode(group), len(group), "lobby %s has members on one node only", lobbies[g])
	}
	var waits []func() error
	for g := range groups {
		waits = append(waits, chatAll(ctx, groups[g], rooms[g], 10, nil))
	}
	for _, wait := range waits {
		require.NoError(t, wait())
	}

	t.Run("every member gets its room's messages once, in order, and no others", func(t *testing.T) {
		for g, ms := range groups {
			acked := allAcked(ms)
			require.Len(t, acked, len(ms)*10, "lobby %s", lobbies[g])
			assertDelivered(t, ms, acked)
			for _, m := range ms {
				assert.Equal(t, len(acked), m.received(), "%s got messages of another room", m.user)
			}
		}
	})
}

// lobbiesOnEveryMaster picks one lobby name per master of the cluster r,
// by the slot of the lobby's hash tag.
func lobbiesOnEveryMaster(ctx context.Context, t *testing.T, r *redistest.Redis) []string {
	t.Helper()
	slots, err := r.Client.ClusterSlots(ctx).Result()
	require.NoError(t, err)
	masterOf := func(slot int) string {
		for _, s := range slots {
			if slot >= int(s.Start) && slot <= int(s.End) && len(s.Nodes) > 0 {
				return s.Nodes[0].Addr
			}
		}
		return ""
	}
	ks := keyspace.New(r.Prefix)
	taken := map[string]bool{}
	var out []string
	for i := 0; i < 1000 && len(out) < len(r.Addrs); i++ {
		name := fmt.Sprintf("lobby%d", i)
		master := masterOf(keyspace.Slot(ks.Key("lobby", name, "rooms")))
		if master != "" && !taken[master] {
			taken[master] = true
			out = append(out, name)
		}
	}
	require.Len(t, out, len(r.Addrs), "masters: %v", slots)
	return out
}

func TestE2ETwoConnectionsOnTwoNodes(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A short lease, so the wait below outlasts a whole lease. A node's
	// seat-renewal loop adopts a shorter lease only after the interval it
	// is sleeping (lease/3 of the lease it started with: 10 s); until then
	// a WebSocket seat of the new 3 s lease lapses unrenewed. Wait that out.
	c.setSetting(ctx, "seat.lease_seconds", 3)
	time.Sleep(12 * time.Second)

	// One user, two devices: least_conn puts the second connection on
	// another node. Closing one must not free the seat the other still
	// sits in (docs/PROTOCOL.md: the close of a user's *last* connection in a
	// room frees the seat).
	phone := newMember(ctx, c, "twice")
	require.NoError(t, phone.connect(ctx))
	laptop := newMember(ctx, c, "twice")
	require.NoError(t, laptop.connect(ctx))
	require.NotEqual(t, phone.node(), laptop.node(), "both connections landed on one node")
	room, err := phone.join(ctx, "devices")
	require.NoError(t, err)
	again, err := laptop.join(ctx, "devices")
	require.NoError(t, err)
	require.Equal(t, room.ID, again.ID)
	// Another user in the room, told of every seat freed in it.
	observer := newMember(ctx, c, "observer")
	require.NoError(t, observer.connect(ctx))
	seen, err := observer.join(ctx, "devices")
	require.NoError(t, err)
	require.Equal(t, room.ID, seen.ID)

	phone.close()
	for range phone.conn.events { // the phone's connection is gone
	}

	t.Run("the other connection keeps its seat and can speak", func(t *testing.T) {
		// The phone's node acted on the close once the phone's attachment
		// is gone from the seat's record in Redis (the rooms package's
		// lobby attids hash: user → space-separated attachment ids, a REST
		// one marked '+'; a WebSocket attachment id is ws:<node>:…): the
		// laptop's is left alone.
		atts := keyspace.New(c.redis.Prefix).Key("lobby", "devices", "attids")
		var ids []string
		require.Eventually(t, func() bool {
			raw, err := c.redis.Client.HGet(ctx, atts, "twice").Result()
			if err != nil {
				return false
			}
			ids = strings.Fields(raw)
			slices.Sort(ids)
			return len(ids) == 1
		}, 15*time.Second, 20*time.Millisecond, "the phone's attachment was not detached: %v", ids)
		require.True(t, strings.HasPrefix(ids[0], "ws:"+laptop.node()+":"), "the attachment left is the laptop's: %v", ids)

		// Past a whole lease (3 s, renewed every second) and a sweep, the
		// seat stays: the laptop's node renews the attachment left.
		var members []string
		seated := func() bool {
			r, err := c.room(ctx, laptop.token, room.ID)
			members = r.Members
			return err == nil && slices.Contains(r.Members, "twice")
		}
		assert.Never(t, func() bool { return !seated() }, 5*time.Second, 50*time.Millisecond, "seat freed: members %v", members)
		assert.False(t, observer.sawPresence(room.ID, "twice", "left"),
			"the room was told twice left (the seat was freed, then taken back): %s", observer.summary())
		_, err := laptop.say(ctx, room.ID, "still here", "after-close")
		if !assert.NoError(t, err, "%s", laptop.summary()) {
			start := time.Now()
			for i := 0; ; i++ {
				if _, err := laptop.say(ctx, room.ID, "still here", fmt.Sprintf("retry-%d", i)); err == nil || ctx.Err() != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("the laptop could speak again %s later (the node's next seat renewal took the seat back)", time.Since(start).Round(100*time.Millisecond))
		}
	})
}
