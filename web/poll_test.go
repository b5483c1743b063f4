package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// call is c.do without a testing.T, safe on any goroutine: it sends one
// request with extra headers and returns the status, body and headers.
func (c *cluster) call(n *testNode, method, path, token string, body any, hdr map[string]string) (int, []byte, http.Header, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		p, err := json.Marshal(b)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(p)
	}
	req, err := http.NewRequest(method, n.url+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	p, err := io.ReadAll(resp.Body)
	return resp.StatusCode, p, resp.Header, err
}

// errCode returns the code of an error body, or "".
func errCode(body []byte) string {
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// pollAnswer is the body of GET /poll.
type pollAnswer struct {
	Dirty []string                   `json:"dirty"`
	Data  map[string]json.RawMessage `json:"data"`
}

// section decodes one section of the answer's data into v; false if absent.
func (a pollAnswer) section(t testing.TB, name string, v any) bool {
	t.Helper()
	raw, ok := a.Data[name]
	if !ok {
		return false
	}
	require.NoError(t, json.Unmarshal(raw, v), "section %s: %s", name, raw)
	return true
}

type roomJSON struct {
	ID       string   `json:"id"`
	Lobby    string   `json:"lobby"`
	Seq      int      `json:"seq"`
	Capacity int      `json:"capacity"`
	Members  []string `json:"members"`
}

type messageJSON struct {
	ID   string `json:"id"`
	Room string `json:"room"`
	From string `json:"from"`
	Text string `json:"text"`
	TS   string `json:"ts"`
}

type entryJSON struct {
	Player string  `json:"player"`
	Score  float64 `json:"score"`
	Rank   int64   `json:"rank"`
}

type walletJSON struct {
	Balance int64            `json:"balance"`
	Items   map[string]int64 `json:"items"`
}

type noticeJSON struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// poll polls once on n (query is "" or "?wait=…").
func (c *cluster) poll(n *testNode, tok, query string) pollAnswer {
	c.t.Helper()
	var out pollAnswer
	require.Equal(c.t, 200, c.do(n, "GET", "/api/v1/poll"+query, tok, nil, &out))
	require.NotNil(c.t, out.Dirty, "dirty is always an array")
	return out
}

// pollUntil long-polls tok round-robin over c's nodes until an answer
// satisfies ok, and returns that answer; it fails after 15s. Answers that
// do not satisfy ok are consumed.
func (c *cluster) pollUntil(tok string, ok func(pollAnswer) bool) pollAnswer {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		a := c.poll(c.nodes[i%len(c.nodes)], tok, "?wait=1")
		if ok(a) {
			return a
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no poll answer as wanted within 15s; last: %+v", a)
		}
	}
}

func dirtyAny(a pollAnswer) bool { return len(a.Dirty) > 0 }

// awaitSections polls tok until every one of sections was dirty in some
// answer. Each producer marks all of a user's sessions in one pipeline, so
// once a probe session saw a producer's section, that producer's mark has
// landed in every session of the user.
func (c *cluster) awaitSections(tok string, sections ...string) {
	c.t.Helper()
	seen := map[string]bool{}
	c.pollUntil(tok, func(a pollAnswer) bool {
		for _, s := range a.Dirty {
			seen[s] = true
		}
		for _, s := range sections {
			if !seen[s] {
				return false
			}
		}
		return true
	})
}

// join joins lobby over REST and returns the room.
func (c *cluster) join(n *testNode, tok, lobby string) roomJSON {
	c.t.Helper()
	var out struct{ Room roomJSON }
	require.Equal(c.t, 200, c.do(n, "POST", "/api/v1/lobbies/"+lobby+"/join", tok, nil, &out))
	return out.Room
}

// say posts text to room over REST and returns the message.
func (c *cluster) say(n *testNode, tok, room, text string) messageJSON {
	c.t.Helper()
	var out struct{ Message messageJSON }
	require.Equal(c.t, 200, c.do(n, "POST", "/api/v1/rooms/"+room+"/messages", tok, map[string]string{"text": text}, &out))
	return out.Message
}

// grant grants user amount coins with the admin token.
func (c *cluster) grant(n *testNode, user string, amount int64) int64 {
	c.t.Helper()
	var out struct{ Balance int64 }
	require.Equal(c.t, 200, c.do(n, "POST", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": user, "amount": amount}, &out))
	return out.Balance
}

// sessionID is the session id inside tok.
func (c *cluster) sessionID(tok string) string {
	c.t.Helper()
	s, err := c.nodes[0].srv.auth.tokens.verify(tok)
	require.NoError(c.t, err)
	return s.Session
}

// dirtyOf is the mask of the named sections.
func dirtyOf(names ...string) dirty.Mask {
	var m dirty.Mask
	for _, n := range names {
		s, ok := dirty.SectionByName(n)
		if !ok {
			panic(n)
		}
		m |= dirty.Of(s)
	}
	return m
}

var allSections = []string{"rooms", "messages", "leaderboards", "settings", "wallet", "notices", "match", "direct"}

func TestPollFirstAnswerHasEverySectionThenNothing(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	n0, n1, n2 := c.nodes[0], c.nodes[1], c.nodes[2]

	// A probe session of alice sees every mark the set-up makes for alice;
	// once it has seen them all, none is still in flight towards the session
	// under test. A watcher (another user: polling notices marks them seen
	// for the user) does the same for the notice, which marks everyone.
	probe := c.session(n1, "alice")
	c.poll(n1, probe, "")
	watcher := c.session(n2, "watcher")
	c.poll(n2, watcher, "")
	c.grant(n2, "alice", 100)
	require.Equal(t, 200, c.do(n2, "POST", "/api/v1/leaderboards/first/scores", probe, map[string]any{"player": "alice", "score": 5}, nil))
	tok := c.session(n0, "alice")
	room := c.join(n1, tok, "first")
	hello := c.say(n2, tok, room.ID, "hello")
	c.awaitSections(probe, "wallet", "leaderboards", "rooms", "messages")
	var notice struct{ ID string }
	require.Equal(t, 200, c.do(n0, "POST", "/api/v1/notices", testAdmin, map[string]string{"text": "welcome"}, &notice))
	c.awaitSections(watcher, "notices")

	first := c.poll(n2, tok, "")
	assert.ElementsMatch(t, allSections, first.Dirty, "a new session starts with every section dirty")
	for _, s := range allSections {
		if s == "direct" {
			continue // documented: it carries nothing, GET /direct has it
		}
		assert.Contains(t, first.Data, s, "the first poll carries %s", s)
	}
	var rs []roomJSON
	if first.section(t, "rooms", &rs) && assert.Len(t, rs, 1) {
		assert.Equal(t, room.ID, rs[0].ID)
		assert.Equal(t, []string{"alice"}, rs[0].Members)
	}
	var msgs map[string][]messageJSON
	if first.section(t, "messages", &msgs) {
		assert.Equal(t, map[string][]messageJSON{room.ID: {hello}}, msgs)
	}
	var boards map[string]entryJSON
	if first.section(t, "leaderboards", &boards) {
		assert.Equal(t, map[string]entryJSON{"first": {Player: "alice", Score: 5, Rank: 0}}, boards)
	}
	var st struct {
		Version int64
		Values  map[string]any
	}
	if first.section(t, "settings", &st) {
		assert.EqualValues(t, 50, st.Values["room.capacity"])
	}
	var w walletJSON
	if first.section(t, "wallet", &w) {
		assert.EqualValues(t, 100, w.Balance)
	}
	var ns []noticeJSON
	if first.section(t, "notices", &ns) {
		assert.Equal(t, []noticeJSON{{ID: notice.ID, Text: "welcome"}}, ns)
	}

	status, body, _, err := c.call(n0, "GET", "/api/v1/poll", tok, nil, nil)
	require.NoError(t, err)
	require.Equal(t, 200, status)
	assert.JSONEq(t, `{"dirty": [], "data": {}}`, string(body), "an immediate second poll is clean")
}

// exactly asserts that a is dirty in section only, and returns a.
func exactly(t testing.TB, a pollAnswer, section string) pollAnswer {
	t.Helper()
	assert.Equal(t, []string{section}, a.Dirty)
	assert.Len(t, a.Data, 1, "only the dirty section's data: %v", a.Data)
	return a
}

func (c *cluster) assertClean(n *testNode, tok string) {
	c.t.Helper()
	a := c.poll(n, tok, "")
	assert.Empty(c.t, a.Dirty, "the next poll is clean")
	assert.Empty(c.t, a.Data)
}

func TestPollEachSectionIsMarkedByAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	n0, n1, n2 := c.nodes[0], c.nodes[1], c.nodes[2]

	alice := c.session(n0, "alice")
	c.poll(n0, alice, "")
	room := c.join(n0, alice, "sec")
	exactly(t, c.pollUntil(alice, dirtyAny), "rooms")
	bob := c.session(n1, "bob")

	t.Run("a join via another node dirties rooms", func(t *testing.T) {
		require.Equal(t, room.ID, c.join(n1, bob, "sec").ID)
		a := exactly(t, c.pollUntil(alice, dirtyAny), "rooms")
		var rs []roomJSON
		if a.section(t, "rooms", &rs) && assert.Len(t, rs, 1) {
			assert.Equal(t, room.ID, rs[0].ID)
			assert.Equal(t, []string{"alice", "bob"}, rs[0].Members)
		}
		c.assertClean(n2, alice)
	})

	t.Run("a leave via another node dirties rooms", func(t *testing.T) {
		var ok struct{ OK bool }
		require.Equal(t, 200, c.do(n2, "POST", "/api/v1/rooms/"+room.ID+"/leave", bob, nil, &ok))
		a := exactly(t, c.pollUntil(alice, dirtyAny), "rooms")
		var rs []roomJSON
		if a.section(t, "rooms", &rs) && assert.Len(t, rs, 1) {
			assert.Equal(t, []string{"alice"}, rs[0].Members)
		}
		c.assertClean(n1, alice)
	})

	t.Run("messages via another node come once per room oldest first", func(t *testing.T) {
		require.Equal(t, room.ID, c.join(n1, bob, "sec").ID)
		exactly(t, c.pollUntil(alice, dirtyAny), "rooms")
		other := c.join(n2, alice, "sec2")
		exactly(t, c.pollUntil(alice, dirtyAny), "rooms")
		require.Equal(t, other.ID, c.join(n2, bob, "sec2").ID)
		exactly(t, c.pollUntil(alice, dirtyAny), "rooms")

		m1 := c.say(n2, bob, room.ID, "one")
		a := exactly(t, c.pollUntil(alice, dirtyAny), "messages")
		var msgs map[string][]messageJSON
		a.section(t, "messages", &msgs)
		assert.Equal(t, map[string][]messageJSON{room.ID: {m1}}, msgs)
		c.assertClean(n0, alice)

		want := map[string][]messageJSON{}
		for i := 0; i < 6; i++ {
			r := []string{room.ID, other.ID}[i%2]
			m := c.say(c.nodes[i%3], bob, r, fmt.Sprint("m", i))
			want[r] = append(want[r], m)
		}
		got := map[string][]messageJSON{}
		count := func() int { return len(got[room.ID]) + len(got[other.ID]) }
		c.pollUntil(alice, func(a pollAnswer) bool {
			if len(a.Dirty) > 0 {
				assert.Equal(t, []string{"messages"}, a.Dirty)
			}
			var part map[string][]messageJSON
			a.section(t, "messages", &part)
			for r, ms := range part {
				got[r] = append(got[r], ms...)
			}
			return count() >= 6
		})
		assert.Equal(t, want, got, "exactly the new messages, per room, oldest first")
		// a mark that landed after the poll that read its message leaves the
		// bit set with nothing new behind it
		for _, n := range c.nodes {
			var part map[string][]messageJSON
			c.poll(n, alice, "").section(t, "messages", &part)
			assert.Empty(t, part, "then nothing")
		}
	})

	t.Run("a score by another player dirties leaderboards", func(t *testing.T) {
		require.Equal(t, 200, c.do(n1, "POST", "/api/v1/leaderboards/secb/scores", alice, map[string]any{"player": "alice", "score": 10}, nil))
		exactly(t, c.pollUntil(alice, dirtyAny), "leaderboards")
		require.Equal(t, 200, c.do(n2, "POST", "/api/v1/leaderboards/secb/scores", bob, map[string]any{"player": "bob", "score": 20}, nil))
		a := exactly(t, c.pollUntil(alice, dirtyAny), "leaderboards")
		var boards map[string]entryJSON
		a.section(t, "leaderboards", &boards)
		assert.Equal(t, map[string]entryJSON{"secb": {Player: "alice", Score: 10, Rank: 1}}, boards)
		c.assertClean(n1, alice)
	})

	t.Run("an admin PUT dirties settings with the new value", func(t *testing.T) {
		var v struct{ Version int64 }
		require.Equal(t, 200, c.do(n2, "PUT", "/api/v1/settings/motd", testAdmin, map[string]any{"value": "hello all"}, &v))
		a := exactly(t, c.pollUntil(alice, dirtyAny), "settings")
		var st struct {
			Version int64
			Values  map[string]any
		}
		a.section(t, "settings", &st)
		assert.GreaterOrEqual(t, st.Version, v.Version)
		assert.Equal(t, "hello all", st.Values["motd"])
		c.assertClean(n0, alice)
	})

	t.Run("a grant and a purchase dirty wallet", func(t *testing.T) {
		c.grant(n1, "alice", 300)
		a := exactly(t, c.pollUntil(alice, dirtyAny), "wallet")
		var w walletJSON
		a.section(t, "wallet", &w)
		assert.EqualValues(t, 300, w.Balance)
		c.assertClean(n2, alice)

		require.Equal(t, 200, c.do(n0, "POST", "/api/v1/shop/items", testAdmin, map[string]any{"item": "sword", "stock": 5, "price": 100}, nil))
		require.Equal(t, 200, c.do(n2, "POST", "/api/v1/shop/buy", alice, map[string]any{"item": "sword", "qty": 2}, nil))
		a = exactly(t, c.pollUntil(alice, dirtyAny), "wallet")
		a.section(t, "wallet", &w)
		assert.Equal(t, walletJSON{Balance: 100, Items: map[string]int64{"sword": 2}}, w)
		c.assertClean(n1, alice)
	})

	t.Run("a notice comes once and never again", func(t *testing.T) {
		var n struct{ ID string }
		require.Equal(t, 200, c.do(n1, "POST", "/api/v1/notices", testAdmin, map[string]string{"text": "maintenance at noon"}, &n))
		a := exactly(t, c.pollUntil(alice, dirtyAny), "notices")
		var ns []noticeJSON
		a.section(t, "notices", &ns)
		assert.Equal(t, []noticeJSON{{ID: n.ID, Text: "maintenance at noon"}}, ns)
		c.assertClean(n2, alice)

		// a new session of alice starts all dirty, but the notice is seen
		again := c.session(n2, "alice")
		first := c.poll(n2, again, "")
		ns = nil
		first.section(t, "notices", &ns)
		assert.Empty(t, ns, "alice saw the notice already")

		var n2nd struct{ ID string }
		require.Equal(t, 200, c.do(n0, "POST", "/api/v1/notices", testAdmin, map[string]string{"text": "second"}, &n2nd))
		a = exactly(t, c.pollUntil(alice, dirtyAny), "notices")
		ns = nil
		a.section(t, "notices", &ns)
		assert.Equal(t, []noticeJSON{{ID: n2nd.ID, Text: "second"}}, ns, "only the new notice")
	})
}

func TestPollStormOfMarksLosesNone(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	c.putSetting("rate.messages_per_second", 1000)

	alice := c.session(c.nodes[0], "alice")
	c.poll(c.nodes[0], alice, "")
	room := c.join(c.nodes[0], alice, "storm")
	writers := []string{"bob", "carol", "dave"}
	toks := map[string]string{}
	for i, w := range writers {
		toks[w] = c.session(c.nodes[i], w)
		require.Equal(t, room.ID, c.join(c.nodes[i], toks[w], "storm").ID)
	}
	c.pollUntil(alice, func(a pollAnswer) bool {
		var rs []roomJSON
		return a.section(t, "rooms", &rs) && len(rs) == 1 && len(rs[0].Members) == 4
	})

	const each, grants = 40, 30
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		posted = map[string]bool{}
		errs   []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		errs = append(errs, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	for i, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < each; k++ {
				status, body, _, err := c.call(c.nodes[(i+k)%3], "POST", "/api/v1/rooms/"+room.ID+"/messages", toks[w], map[string]string{"text": fmt.Sprint(w, k)}, nil)
				if err != nil || status != 200 {
					fail("post: %d %s %v", status, body, err)
					continue
				}
				var out struct{ Message messageJSON }
				_ = json.Unmarshal(body, &out)
				mu.Lock()
				posted[out.Message.ID] = true
				mu.Unlock()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; k < grants; k++ {
			status, body, _, err := c.call(c.nodes[k%3], "POST", "/api/v1/wallet/grant", testAdmin, map[string]any{"user": "alice", "amount": 1}, nil)
			if err != nil || status != 200 {
				fail("grant: %d %s %v", status, body, err)
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var got []messageJSON
	balance := int64(0)
	take := func(a pollAnswer) {
		var part map[string][]messageJSON
		a.section(t, "messages", &part)
		got = append(got, part[room.ID]...)
		var w walletJSON
		if a.section(t, "wallet", &w) {
			balance = w.Balance
		}
	}
	// polls race the marks: plain polls on every node, as fast as they go
	for i := 0; ; i++ {
		select {
		case <-done:
		default:
			take(c.poll(c.nodes[i%3], alice, ""))
			continue
		}
		break
	}
	require.Empty(t, errs)
	// every change made is seen by a later poll: the last marks are not lost
	c.pollUntil(alice, func(a pollAnswer) bool {
		take(a)
		return len(got) >= len(writers)*each && balance == grants
	})
	seen := map[string]bool{}
	for i, m := range got {
		assert.False(t, seen[m.ID], "message %s delivered twice", m.ID)
		seen[m.ID] = true
		if i > 0 {
			assert.Less(t, got[i-1].ID, m.ID, "oldest first")
		}
	}
	assert.Equal(t, posted, seen, "every message polled exactly once")
	assert.EqualValues(t, grants, balance)
}

// waitersKey is the Redis set that says a long poll of session waits (the
// dirty package's key layout, read here to know the poll is parked).
func waitersKey(prefix, session string) string {
	return keyspace.New(prefix).Key("session", session, "waiters")
}

func TestLongPollWakesOnAMarkFromAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	alice := c.session(c.nodes[0], "alice")
	c.poll(c.nodes[0], alice, "")

	park := func(query string) <-chan pollAnswer { return c.park(c.nodes[0], alice, query) }

	for _, query := range []string{"?wait=5", "?wait=30"} {
		t.Run(query+" returns at the mark, before the wait is up", func(t *testing.T) {
			ch := park(query)
			c.grant(c.nodes[2], "alice", 1)
			select {
			case a := <-ch:
				assert.Equal(t, []string{"wallet"}, a.Dirty, "woken by the mark, not timed out clean")
			case <-time.After(4 * time.Second):
				t.Fatal("the long poll was not woken by a mark made on another node")
			}
		})
	}

	t.Run("wait=1 returns clean when nothing is marked", func(t *testing.T) {
		status, body, _, err := c.call(c.nodes[1], "GET", "/api/v1/poll?wait=1", alice, nil, nil)
		require.NoError(t, err)
		require.Equal(t, 200, status)
		assert.JSONEq(t, `{"dirty": [], "data": {}}`, string(body))
	})

	t.Run("a bad wait is 400", func(t *testing.T) {
		// the contract's bound is 30 s: more is refused, not cut down
		for _, q := range []string{"abc", "-1", "1.5", "1e3", "99999999999999999999", "31", "1000"} {
			status, body, _, err := c.call(c.nodes[1], "GET", "/api/v1/poll?wait="+q, alice, nil, nil)
			require.NoError(t, err)
			assert.Equal(t, 400, status, "wait=%s", q)
			assert.Equal(t, "bad_request", errCode(body), "wait=%s", q)
		}
	})
}

func TestPollRenewsTheCallersSeats(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	alice := c.session(c.nodes[0], "alice")
	bob := c.session(c.nodes[1], "bob")
	// alice polls every node under the default 30s lease first: a renewal
	// schedule made then must not outlive the shorter lease that follows
	for _, n := range c.nodes {
		c.poll(n, alice, "")
	}
	c.putSetting("seat.lease_seconds", 2)
	room := c.join(c.nodes[0], alice, "lease")
	require.Equal(t, room.ID, c.join(c.nodes[1], bob, "lease").ID)

	// alice polls, bob does not: bob's seat lapses and is swept, alice's is
	// renewed by her polls
	deadline := time.Now().Add(20 * time.Second)
	var members []string
	for i := 0; !slices.Equal(members, []string{"alice"}); i++ {
		require.True(t, time.Now().Before(deadline), "bob's seat was not freed, or alice's was: members %v", members)
		c.poll(c.nodes[i%3], alice, "")
		var out struct{ Room roomJSON }
		require.Equal(t, 200, c.do(c.nodes[(i+1)%3], "GET", "/api/v1/rooms/"+room.ID, alice, nil, &out))
		members = out.Room.Members
		time.Sleep(100 * time.Millisecond)
	}
	assert.Equal(t, 200, c.do(c.nodes[2], "POST", "/api/v1/rooms/"+room.ID+"/messages", alice, map[string]string{"text": "still here"}, nil), "alice holds her seat")

	// bob's next poll says he is in no room any more
	a := c.poll(c.nodes[2], bob, "")
	assert.Contains(t, a.Dirty, "rooms")
	var rs []roomJSON
	a.section(t, "rooms", &rs)
	assert.Empty(t, rs, "the lapsed room is gone from bob's rooms")
	var msgs map[string][]messageJSON
	a.section(t, "messages", &msgs)
	assert.Empty(t, msgs, "and from his messages")
	p := c.presence(c.nodes[0], alice, "bob")
	assert.Empty(t, p.Rooms)

	// and a post of his says why he holds no seat
	status, body, _, err := c.call(c.nodes[1], "POST", "/api/v1/rooms/"+room.ID+"/messages", bob, map[string]string{"text": "still here?"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 403, status, "%s", body)
	assert.Equal(t, "not_seated", errCode(body))
	var e struct{ Error struct{ Message string } }
	require.NoError(t, json.Unmarshal(body, &e))
	assert.Contains(t, e.Error.Message, room.ID, "the message names the room")
	assert.Contains(t, e.Error.Message, "seat.lease_seconds", "the message names the lease that lapsed")
	assert.Contains(t, e.Error.Message, "2 seconds", "the message gives the lease in force")
}

// cmdLog is a go-redis hook on one node's own client that records every
// command the client sends, nothing filtered, each with the side that sent
// it: the serving of an HTTP request (the goroutine is a fasthttp worker:
// its stack holds valyala/fasthttp) or the node's background work (its
// loops, marks and bus, on goroutines of their own). A test that sends one
// request at a time to the node knows every request-side command between
// two takes is that request's; the background ones are kept apart, so a
// sweep that runs meanwhile neither hides nor fakes a command.
type cmdLog struct {
	mu      sync.Mutex
	request []string
	other   []string
	// hold, when set, runs before each command is sent (outside the lock):
	// it may block the command.
	hold func(name string)
}

func (h *cmdLog) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *cmdLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *cmdLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.record(cmds...)
		return next(ctx, cmds)
	}
}

func (h *cmdLog) record(cmds ...redis.Cmder) {
	buf := make([]byte, 64<<10)
	request := bytes.Contains(buf[:runtime.Stack(buf, false)], []byte("github.com/valyala/fasthttp."))
	h.mu.Lock()
	hold := h.hold
	for _, c := range cmds {
		if connInit(c) {
			continue
		}
		if request {
			h.request = append(h.request, c.FullName())
		} else {
			h.other = append(h.other, c.FullName())
		}
	}
	h.mu.Unlock()
	if hold != nil {
		for _, c := range cmds {
			hold(c.FullName())
		}
	}
}

// connInit reports whether c is part of a new pool connection's handshake
// (HELLO, CLIENT SETINFO, AUTH, SELECT), which go-redis sends through the
// hooks when the pool dials: a cost of the pool growing under load, not
// of the request that happened to need the new connection.
func connInit(c redis.Cmder) bool {
	switch strings.ToLower(c.Name()) {
	case "hello", "auth", "select":
		return true
	case "client":
		a := c.Args()
		return len(a) > 1 && strings.EqualFold(fmt.Sprint(a[1]), "setinfo")
	}
	return false
}

// take returns the commands recorded since the last take, request side
// and background, and forgets them.
func (h *cmdLog) take() (request, other []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	request, other = h.request, h.other
	h.request, h.other = nil, nil
	return request, other
}

// logCommands gives each node of a cluster a cmdLog, by node id.
func logCommands(logs map[string]*cmdLog) nodeOpts {
	return nodeOpts{configure: func(cfg *nodeConfig) {
		h := &cmdLog{}
		logs[cfg.Node] = h
		cfg.Redis.AddHook(h)
	}}
}

// park starts a long poll of tok on n and returns once it is parked: its
// registration is in Redis (the session's waiters key, which must be gone
// first: a registration outlives a poll that timed out by a margin) and no
// answer came yet. The answer, or an error as its only dirty entry, comes
// on the channel.
func (c *cluster) park(n *testNode, tok, query string) <-chan pollAnswer {
	c.t.Helper()
	ctx := context.Background()
	key := waitersKey(c.r.Prefix, c.sessionID(tok))
	parked := func() bool { return c.r.Client.Exists(ctx, key).Val() == 1 }
	require.Eventually(c.t, func() bool { return !parked() }, 15*time.Second, 5*time.Millisecond,
		"an earlier long poll's registration is still in Redis")
	ch := make(chan pollAnswer, 1)
	go func() {
		var a pollAnswer
		status, body, _, err := c.call(n, "GET", "/api/v1/poll"+query, tok, nil, nil)
		if err == nil && status == 200 {
			err = json.Unmarshal(body, &a)
		}
		if err != nil || status != 200 {
			a.Dirty = []string{fmt.Sprintf("error %d %s %v", status, body, err)}
		}
		ch <- a
	}()
	require.Eventually(c.t, parked, 15*time.Second, 2*time.Millisecond, "the long poll registers as waiting")
	select {
	case a := <-ch:
		c.t.Fatalf("the long poll answered before anything was marked: %+v", a)
	default:
	}
	return ch
}

// TestCleanPollIsOneRedisCommand counts every command a node's client
// sends (cmdLog: nothing filtered), split into the request's and the
// background's. With the longest seat lease, a session's seats and its
// dirty-tracking session are renewed by its first polls on each node only
// (a warm-up, logged); after that a clean poll is exactly one EVALSHA
// (dirty's take script: its GETDEL, after the GET of the call's record that
// answers go-redis's retry of it), a
// clean long poll that times out exactly one EVALSHA (the wait script),
// and a long poll woken by a mark made on another node exactly the wait
// script twice (parking, then the wake-up's take) plus the wallet read
// the mark asks for (one MULTI/GET/HGETALL/EXEC).
func TestCleanPollIsOneRedisCommand(t *testing.T) {
	t.Parallel()
	logs := map[string]*cmdLog{}
	c := newCluster(t, redistest.Real(t), 3, logCommands(logs))
	c.putSetting("seat.lease_seconds", 3600)
	const user = "pollcounted"
	tok := c.session(c.nodes[0], user)
	c.poll(c.nodes[0], tok, "")
	c.join(c.nodes[1], tok, "counted")
	exactly(t, c.pollUntil(tok, dirtyAny), "rooms")

	background := 0
	for i, n := range c.nodes {
		h := logs[n.srv.Node()]
		c.poll(n, tok, "")
		c.poll(n, tok, "?wait=1")
		req, _ := h.take()
		t.Logf("the session's warm-up polls on %s: %v", n.srv.Node(), req)

		for k := 0; k < 10; k++ {
			a := c.poll(n, tok, "")
			req, other := h.take()
			background += len(other)
			require.Empty(t, a.Dirty)
			assert.Equal(t, []string{"evalsha"}, req, "clean poll %d on %s is one script call", k, n.srv.Node())
		}

		a := c.poll(n, tok, "?wait=1")
		req, other := h.take()
		background += len(other)
		require.Empty(t, a.Dirty)
		assert.Equal(t, []string{"evalsha"}, req, "a clean long poll that times out on %s is one script call", n.srv.Node())

		ch := c.park(n, tok, "?wait=30")
		c.grant(c.nodes[(i+1)%3], user, 1)
		select {
		case a := <-ch:
			assert.Equal(t, []string{"wallet"}, a.Dirty, "woken by the mark")
		case <-time.After(15 * time.Second):
			t.Fatalf("the long poll on %s was not woken by a grant on another node", n.srv.Node())
		}
		req, other = h.take()
		background += len(other)
		assert.Equal(t, []string{"evalsha", "evalsha", "multi", "get", "hgetall", "exec"}, req,
			"a long poll woken by a mark on %s: the wait script twice, then the wallet", n.srv.Node())
	}
	t.Logf("background commands sent while the polls ran: %d", background)
}

func TestPollSettingsAnswerWhatRedisHoldsEvenIfThisNodeMissedTheChange(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	c := newCluster(t, r, 2)
	ctx := context.Background()
	alice := c.session(c.nodes[0], "alice")
	c.poll(c.nodes[0], alice, "")

	// A change whose pub/sub message no node received (written past the
	// settings package, in its key layout), then the mark its writer makes.
	ks := keyspace.New(r.Prefix)
	require.NoError(t, r.Client.HSet(ctx, ks.Key("settings", "live", "values"), "motd", `"missed"`).Err())
	require.NoError(t, r.Client.Incr(ctx, ks.Key("settings", "live", "version")).Err())
	tracker := dirty.New(r.Client, dirty.Config{Prefix: r.Prefix, Node: "test"})
	require.NoError(t, tracker.MarkSessions(ctx, []string{c.sessionID(alice)}, dirtyOf("settings")))

	a := exactly(t, c.poll(c.nodes[1], alice, ""), "settings")
	var st struct {
		Values map[string]any
	}
	a.section(t, "settings", &st)
	assert.Equal(t, "missed", st.Values["motd"], "the poll spends the bit on the value in Redis")
}
