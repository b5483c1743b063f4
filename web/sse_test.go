package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/protocol"
)

// TestStreamAndWebSocketOneRoomAcrossThreeNodes: an SSE client and a
// WebSocket client in one room, each on its own node, while both send
// (the SSE user over REST on every node in turn): each sees every
// message once, in id order, the same sequence; every SSE message record
// carries the stream's position.
func TestStreamAndWebSocketOneRoomAcrossThreeNodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	c.putSetting("rate.messages_per_second", 10000)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	sam := c.session(n1, "sam")
	room := c.join(n2, sam, "mix").ID
	st := openStream(t, n1, "sam", sam, streamOpts{query: true})
	joined := st.next("joined")
	require.Equal(t, room, joined.data["room"].(map[string]any)["id"])

	wes := c.dial(n3, "wes")
	require.Equal(t, room, wes.join("mix"), "one lobby, one room with free seats")

	const each = 25
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < each; i++ {
			wes.send(protocol.Say{Room: room, Text: fmt.Sprintf("w-%d", i)})
		}
	}()
	for i := 0; i < each; i++ {
		c.say(c.nodes[i%3], sam, room, fmt.Sprintf("s-%d", i))
	}
	wg.Wait()

	recs := st.messages(room, 2*each)
	wsIDs := wes.collect(2 * each)
	seen := map[string]bool{}
	var sseIDs []string
	for i, r := range recs {
		id, text := recID(r)
		assert.False(t, seen[text], "%q twice on the stream", text)
		seen[text] = true
		sseIDs = append(sseIDs, id)
		assert.Equal(t, room+"@"+id, r.id, "the record's id is the stream's position")
		if i > 0 {
			assert.Less(t, sseIDs[i-1], id, "stream out of order")
		}
	}
	for i := 0; i < each; i++ {
		assert.True(t, seen[fmt.Sprintf("w-%d", i)] && seen[fmt.Sprintf("s-%d", i)], "message %d missing", i)
	}
	assert.Equal(t, sseIDs, wsIDs, "the stream and the WebSocket saw different sequences")
	for i := 1; i < len(wsIDs); i++ {
		assert.Less(t, wsIDs[i-1], wsIDs[i], "WebSocket out of order")
	}
	// nothing more than those: a marker sent last is the next message on both
	mark := c.say(n3, sam, room, "last").ID
	id, _ := recID(st.next("message"))
	assert.Equal(t, mark, id)
	wid, _ := msgOf(wes.next("message"))
	assert.Equal(t, mark, wid)
}

// TestStreamResumesOnAnotherNode: a stream in two rooms is cut; messages
// sent meanwhile on other nodes come, once each and in order, on a stream
// reopened on another node with the Last-Event-ID it had; then live.
func TestStreamResumesOnAnotherNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	c.putSetting("rate.messages_per_second", 10000)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	sam := c.session(n1, "sam")
	bob := c.session(n1, "bob")
	ra := c.join(n1, sam, "alpha").ID
	rb := c.join(n1, sam, "beta").ID
	c.join(n1, bob, "alpha")
	c.join(n1, bob, "beta")

	st := openStream(t, n1, "sam", sam, streamOpts{})
	for i := 0; i < 3; i++ {
		c.say(n2, bob, ra, fmt.Sprintf("a-%d", i))
		c.say(n3, bob, rb, fmt.Sprintf("b-%d", i))
	}
	st.texts("a-2", "b-2")
	pos := st.last()
	lastA := msgID(t, c, n1, sam, ra, "a-2")
	lastB := msgID(t, c, n1, sam, rb, "b-2")
	assert.Equal(t, ra+"@"+lastA+","+rb+"@"+lastB, pos, "every room, sorted")
	st.close()

	var missed []string
	for i := 3; i < 8; i++ {
		missed = append(missed, c.say(c.nodes[i%3], bob, ra, fmt.Sprintf("a-%d", i)).ID)
		missed = append(missed, c.say(c.nodes[(i+1)%3], bob, rb, fmt.Sprintf("b-%d", i)).ID)
	}

	st2 := openStream(t, n2, "sam", sam, streamOpts{last: pos})
	live := c.say(n3, bob, ra, "live").ID
	got := map[string][]string{}
	for len(got[ra]) < 6 || len(got[rb]) < 5 {
		r := st2.next("message")
		id, _ := recID(r)
		room := r.data["message"].(map[string]any)["room"].(string)
		got[room] = append(got[room], id)
	}
	var wantA, wantB []string
	for i, id := range missed {
		if i%2 == 0 {
			wantA = append(wantA, id)
		} else {
			wantB = append(wantB, id)
		}
	}
	assert.Equal(t, append(wantA, live), got[ra], "room a: every missed message once, in order, then live")
	assert.Equal(t, wantB, got[rb], "room b: every missed message once, in order")
	assert.Equal(t, ra+"@"+live+","+rb+"@"+wantB[len(wantB)-1], st2.last())

	// the same through ?last_event_id= (a client that is not EventSource)
	st2.close()
	st3 := openStream(t, n3, "sam", sam, streamOpts{query: true, lastQ: st2.last()})
	next := c.say(n1, bob, rb, "after").ID
	id, _ := recID(st3.next("message"))
	assert.Equal(t, next, id, "nothing replayed before the new message")
}

// msgID is the id of the message of room with text, read over REST.
func msgID(t testing.TB, c *cluster, n *testNode, tok, room, text string) string {
	t.Helper()
	var out struct{ Messages []messageJSON }
	require.Equal(t, 200, c.do(n, "GET", "/api/v1/rooms/"+room+"/messages?limit=1000", tok, nil, &out))
	for _, m := range out.Messages {
		if m.Text == text {
			return m.ID
		}
	}
	t.Fatalf("no message %q in %s", text, room)
	return ""
}

// members is the room's live members, read over REST on n.
func (c *cluster) members(n *testNode, tok, room string) []string {
	c.t.Helper()
	var out struct{ Room roomJSON }
	require.Equal(c.t, 200, c.do(n, "GET", "/api/v1/rooms/"+room, tok, nil, &out))
	return out.Room.Members
}

// TestStreamHoldsItsSeats: the seat a session took over REST is held by
// its stream while the stream is open — its REST attachment lapses
// without polls, the seat stays — and freed once the stream is gone.
func TestStreamHoldsItsSeats(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 1)
	c.putSetting("seat.lease_seconds", 2)
	// n2, which holds the stream, starts with the short lease: a node's
	// renewal loop adopts a new lease only after the interval it sleeps
	// (a third of the lease it started with)
	n1, n2 := c.nodes[0], c.startNode("n2")
	sam := c.session(n1, "sam")
	room := c.join(n1, sam, "seat").ID
	st := openStream(t, n2, "sam", sam, streamOpts{})
	st.next("joined")

	// the REST attachment's lease runs out (nothing polls) ...
	ctx := context.Background()
	atts := keyspace.New(c.r.Prefix).Key("lobby", "seat", "attachments")
	restAtt := "sam rest:" + c.sessionID(sam)
	require.Eventually(t, func() bool {
		exp, err := n1.rdb.ZScore(ctx, atts, restAtt).Result()
		if err == redis.Nil {
			return true // reaped
		}
		now, terr := n1.rdb.Time(ctx).Result()
		return err == nil && terr == nil && float64(now.UnixMilli()) > exp
	}, frameWait, 50*time.Millisecond, "the REST attachment never lapsed")
	// ... and the stream's attachment holds the seat: once the REST one
	// has been reaped, the seat is still there, and stays while the
	// stream is open
	require.Eventually(t, func() bool {
		_, err := n1.rdb.ZScore(ctx, atts, restAtt).Result()
		return err == redis.Nil
	}, frameWait, 50*time.Millisecond, "the lapsed REST attachment was never reaped")
	assert.Contains(t, c.members(n1, sam, room), "sam", "the open stream lost its seat")
	members, err := n1.rdb.ZRange(ctx, atts, 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, members, 1, "only the stream's attachment: %v", members)
	assert.True(t, strings.HasPrefix(members[0], "sam ws:n2:"), "the stream's attachment: %v", members)

	// the stream goes: its seat is freed
	st.close()
	require.Eventually(t, func() bool {
		return !slicesContains(c.members(n1, sam, room), "sam")
	}, 2*frameWait, 50*time.Millisecond, "the seat outlived the stream")
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestStreamDrainSaysReconnect: a node that shuts down ends its streams
// with a reconnect event (1012); the client reopens on another node with
// its Last-Event-ID and misses nothing.
func TestStreamDrainSaysReconnect(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 2)
	n1, n2 := c.nodes[0], c.nodes[1]
	sam := c.session(n1, "sam")
	bob := c.session(n1, "bob")
	room := c.join(n1, sam, "drain").ID
	c.join(n1, bob, "drain")
	st := openStream(t, n2, "sam", sam, streamOpts{})
	first := c.say(n1, bob, room, "before").ID
	id, _ := recID(st.next("message"))
	require.Equal(t, first, id)

	n2.stop()
	r := st.next("reconnect")
	assert.Equal(t, "reconnect", r.event, "a named event: EventSource's onmessage does not see it")
	assert.EqualValues(t, 1012, r.data["code"])
	assert.Empty(t, r.id, "the ending record moves no position")
	st.awaitEnd()

	missed := c.say(n1, bob, room, "meanwhile").ID
	st2 := openStream(t, n1, "sam", sam, streamOpts{last: st.last()})
	id, _ = recID(st2.next("message"))
	assert.Equal(t, missed, id, "the message sent while away, and nothing before it")
}

// TestStreamClosedByModeration: a kick ends the stream with a close event
// naming 4001; a ban with 4003.
func TestStreamClosedByModeration(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 2)
	n1, n2 := c.nodes[0], c.nodes[1]
	sam := c.session(n1, "sam")
	st := openStream(t, n2, "sam", sam, streamOpts{query: true})
	require.Equal(t, 200, c.do(n1, "POST", "/api/v1/moderation/kick", testAdmin, map[string]any{"user": "sam", "reason": "calm down"}, nil))
	r := st.next("close")
	assert.Equal(t, "close", r.event)
	assert.EqualValues(t, 4001, r.data["code"])
	assert.Equal(t, "calm down", r.data["reason"])
	st.awaitEnd()

	st = openStream(t, n2, "sam", sam, streamOpts{query: true})
	require.Equal(t, 200, c.do(n1, "POST", "/api/v1/moderation/ban", testAdmin, map[string]any{"user": "sam", "seconds": 60}, nil))
	r = st.next("close")
	assert.EqualValues(t, 4003, r.data["code"])
	st.awaitEnd()
	assert.Eventually(t, func() bool {
		status, _, _, _ := c.call(n2, "GET", "/api/v1/events?token="+sam, "", nil, nil)
		return status == http.StatusForbidden
	}, frameWait, 20*time.Millisecond, "a banned user opens no stream")
}

// TestStreamRefusals: a bad token is 401 bad_token, a malformed position
// 400 bad_request, before any stream opens.
func TestStreamRefusals(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 1)
	n := c.nodes[0]
	sam := c.session(n, "sam")
	var e struct{ Error APIError }
	assert.Equal(t, 401, c.do(n, "GET", "/api/v1/events", "", nil, &e))
	assert.Equal(t, "bad_token", e.Error.Code)
	assert.Equal(t, 401, c.do(n, "GET", "/api/v1/events?token=forged.jwt.token", "", nil, &e))
	assert.Equal(t, "bad_token", e.Error.Code)
	for _, bad := range []string{"nonsense", "general-1@", "general-1@1-1,", "no spaces-1@1-1", "general-1@x-1"} {
		status, body, _, err := c.call(n, "GET", "/api/v1/events", sam, nil, map[string]string{"Last-Event-ID": bad})
		require.NoError(t, err)
		assert.Equal(t, 400, status, "Last-Event-ID %q: %s", bad, body)
		assert.Contains(t, string(body), `"bad_request"`)
		assert.Equal(t, 400, c.do(n, "GET", "/api/v1/events?last_event_id="+url.QueryEscape(bad), sam, nil, &e), bad)
		assert.Equal(t, "bad_request", e.Error.Code)
	}
	// a refused open holds no connection lease: a stream still opens
	st := openStream(t, n, "sam", sam, streamOpts{last: "general-1@1-1"})
	st.close()
}

// TestStreamSlowReaderDroppedBurstNot: a burst of about 10 MB to a room
// reaches a stream that reads, all of it in order, while a stream on the
// same node whose reader stopped (a tiny receive buffer, never read
// after its joined) is dropped, and the node forgets it.
func TestStreamSlowReaderDroppedBurstNot(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 2)
	c.putSetting("rate.messages_per_second", 10000)
	c.putSetting("message.max_length", 16384)
	n1 := c.nodes[0]
	fast := c.session(n1, "fast")
	slow := c.session(n1, "slow")
	bob := c.session(n1, "bob")
	room := c.join(n1, fast, "burst").ID
	c.join(n1, slow, "burst")
	c.join(n1, bob, "burst")
	st := openStream(t, n1, "fast", fast, streamOpts{})
	st.next("joined")

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(n1.url, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = fmt.Fprintf(conn, "GET /api/v1/events HTTP/1.1\r\nHost: chatd\r\nAuthorization: Bearer %s\r\n\r\n", slow)
	require.NoError(t, err)
	var head []byte
	buf := make([]byte, 1024)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(frameWait)))
	for !bytes.Contains(head, []byte(`"type":"joined"`)) {
		n, err := conn.Read(buf)
		require.NoError(t, err, "the slow stream never said joined: %s", head)
		head = append(head, buf[:n]...)
	}
	require.Contains(t, string(head), "200 OK")
	require.Equal(t, 1, n1.node.Reads.Connections("slow"))
	// from now on the slow stream reads nothing

	const burst, size = 600, 16000
	text := strings.Repeat("x", size-8)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < burst; i += 4 {
				status, body, _, err := c.call(c.nodes[i%2], "POST", "/api/v1/rooms/"+room+"/messages", bob, map[string]string{"text": fmt.Sprintf("%05d-%s", i, text)}, nil)
				if err != nil || status != 200 {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("post %d: %d %v %.200s", i, status, err, body))
					mu.Unlock()
				}
			}
		}(w)
	}
	recs := st.messages(room, burst)
	wg.Wait()
	require.Empty(t, failed)
	seen := map[string]bool{}
	for i, r := range recs {
		id, text := recID(r)
		require.Len(t, text, size-2)
		assert.False(t, seen[text[:5]], "message %s twice", text[:5])
		seen[text[:5]] = true
		if i > 0 {
			prev, _ := recID(recs[i-1])
			assert.Less(t, prev, id, "out of order")
		}
	}
	assert.Len(t, seen, burst, "the reading stream got the whole burst")
	require.Eventually(t, func() bool { return n1.node.Reads.Connections("slow") == 0 }, 2*frameWait, 50*time.Millisecond,
		"the stream that stopped reading was never dropped")
	assert.Equal(t, 1, n1.node.Reads.Connections("fast"), "the reading stream stays")
}

// TestStreamFollowsItsSession: REST joins and leaves of the stream's
// session, taken by other nodes, enter and leave the rooms on the stream;
// a room left leaves the stream's position.
func TestStreamFollowsItsSession(t *testing.T) {
	t.Parallel()
	c := newCluster(t, redistest.Real(t), 3)
	n1, n2, n3 := c.nodes[0], c.nodes[1], c.nodes[2]
	sam := c.session(n1, "sam")
	bob := c.session(n1, "bob")
	st := openStream(t, n1, "sam", sam, streamOpts{})

	ra := c.join(n2, sam, "follow-a").ID
	joined := st.next("joined")
	require.Equal(t, ra, joined.data["room"].(map[string]any)["id"])
	rb := c.join(n3, sam, "follow-b").ID
	joined = st.next("joined")
	require.Equal(t, rb, joined.data["room"].(map[string]any)["id"])
	c.join(n2, bob, "follow-a")
	c.join(n2, bob, "follow-b")
	a := c.say(n2, bob, ra, "in a").ID
	b := c.say(n3, bob, rb, "in b").ID
	st.texts("in a", "in b")
	assert.Equal(t, ra+"@"+a+","+rb+"@"+b, st.last())

	require.Equal(t, 200, c.do(n3, "POST", "/api/v1/rooms/"+ra+"/leave", sam, nil, nil))
	left := st.next("left")
	assert.Equal(t, ra, left.data["room"])
	b2 := c.say(n2, bob, rb, "b again").ID
	c.say(n2, bob, ra, "not for sam")
	id, text := recID(st.next("message"))
	assert.Equal(t, b2, id, "nothing of the room left: %s", text)
	assert.Equal(t, rb+"@"+b2, st.last(), "the room left is out of the position")
}
