package chat_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/chat"
	"github.com/chatd/chatd/realtime/polls"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/rooms"
)

func TestJoinAndSayAcrossTwoNodes(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	a, fa := n1.Connect(t, "alice")
	b, fb := n2.Connect(t, "bob")
	room := n1.JoinRoom(t, a, fa, "lobby")
	require.Equal(t, room, n2.JoinRoom(t, b, fb, "lobby"), "the second joiner is seated in the same room")

	var acked []string
	for i := range 20 {
		acked = append(acked, n1.Say(t, a, fa, room, fmt.Sprint("m", i), fmt.Sprint("r", i)))
	}
	fb.Wait(t, "20 messages on the other node", func([]map[string]any) bool { return len(fb.Messages(room)) >= 20 })
	assert.Equal(t, acked, fb.Messages(room), "every acked message once, in order, on the other node")
	fa.Wait(t, "20 messages back to the sender", func([]map[string]any) bool { return len(fa.Messages(room)) >= 20 })
	assert.Equal(t, acked, fa.Messages(room), "and to the sender")
}

func TestResumeOnAnotherNodeReplaysExactlyWhatWasMissed(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	a, fa := n1.Connect(t, "alice")
	b, fb := n1.Connect(t, "bob")
	room := n1.JoinRoom(t, a, fa, "resume")
	n1.JoinRoom(t, b, fb, "resume")
	last := n1.Say(t, a, fa, room, "seen by bob", "r0")
	fb.Wait(t, "the first message", func([]map[string]any) bool { return len(fb.Messages(room)) == 1 })
	n1.Chat.Disconnect(context.Background(), b) // bob's connection drops
	var missed []string
	for i := range 7 {
		missed = append(missed, n1.Say(t, a, fa, room, fmt.Sprint("missed ", i), fmt.Sprint("m", i)))
	}
	b2, fb2 := n2.Connect(t, "bob")
	require.NoError(t, n2.Chat.Resume(context.Background(), b2, room, last))
	fb2.Wait(t, "the 7 missed", func([]map[string]any) bool { return len(fb2.Messages(room)) >= 7 })
	live := n1.Say(t, a, fa, room, "live", "l")
	fb2.Wait(t, "the live one", func([]map[string]any) bool { return len(fb2.Messages(room)) >= 8 })
	assert.Equal(t, append(missed, live), fb2.Messages(room), "exactly the missed ones, then live: no gap, no duplicate")
}

func TestResumeAfterAnIDNoLongerInTheHistoryIsAGap(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n := startNode(t, r, "n1")
	a, fa := n.Connect(t, "alice")
	room := n.JoinRoom(t, a, fa, "gap")
	id := n.Say(t, a, fa, room, "kept", "r")
	b, fb := n.Connect(t, "bob")
	require.NoError(t, n.Chat.Resume(context.Background(), b, room, "0000000000001-000000"))
	e := fb.First(t, "error", nil)
	assert.Equal(t, "resume_gap", e["code"])
	assert.Equal(t, room, e["room"])
	fb.Wait(t, "the latest messages", func([]map[string]any) bool { return len(fb.Messages(room)) == 1 })
	assert.Equal(t, []string{id}, fb.Messages(room))
	assert.Equal(t, errcode.BadRequest, errcode.Of(n.Chat.Resume(context.Background(), b, room, "not-an-id")), "checked before anything")
}

func TestGapFillAfterThePubSubConnectionIsKilled(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	a, fa := n1.Connect(t, "alice")
	b, fb := n2.Connect(t, "bob")
	room := n1.JoinRoom(t, a, fa, "fill")
	n2.JoinRoom(t, b, fb, "fill")
	var sent []string
	for i := range 5 {
		sent = append(sent, n1.Say(t, a, fa, room, fmt.Sprint("before ", i), fmt.Sprint("b", i)))
	}
	fb.Wait(t, "the first five", func([]map[string]any) bool { return len(fb.Messages(room)) == 5 })
	// Kill every pub/sub connection (n2's among them), and keep talking
	// while it comes back: the hub's gap fill must deliver what it missed.
	require.NoError(t, r.Client.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err())
	for i := range 30 {
		sent = append(sent, n1.Say(t, a, fa, room, fmt.Sprint("during ", i), fmt.Sprint("d", i)))
	}
	fb.Wait(t, "all 35", func([]map[string]any) bool { return len(fb.Messages(room)) >= 35 })
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, sent, fb.Messages(room), "every message once, in order, across the reconnect")
}

func TestASlowClientIsClosedAndTheOthersGetEverything(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n := startNode(t, r, "n1")
	slow, fs := n.Connect(t, "slow")
	fast, ff := n.Connect(t, "fast")
	fs.Block()
	frame := []byte(`{"type":"notice","id":"x","text":"` + strings.Repeat("x", 64<<10) + `"}`)
	notices := func(f []map[string]any) int {
		n := 0
		for _, m := range f {
			if m["type"] == "notice" {
				n++
			}
		}
		return n
	}
	count := 0
	// The writer may have taken a few frames into the Write it blocks in:
	// those left the queue, so send until the queue's bound closes the
	// client, and fail if twice the bound's worth did not.
	for !slow.Closing() {
		require.Less(t, count*len(frame), 2*realtime.HardQueueBytes, "the queue bound never closed the client")
		slow.Send(frame)
		fast.Send(frame)
		count++
		// the reader keeps up (a burst of 16 MiB would close it too: the
		// hard bound is for queued bytes, whoever queued them)
		ff.Wait(t, "the reader keeps up", func(f []map[string]any) bool { return notices(f) == count })
	}
	assert.Equal(t, realtime.CloseTryLater, realtimetest.CloseCode(t, fs), "the client that does not read is closed with 1013")
	assert.False(t, fast.Closing(), "the reader is not")
	fast.Send(frame)
	ff.Wait(t, "one more", func(f []map[string]any) bool { return notices(f) == count+1 })
}

func TestShutdownClosesWith1012AndFreesTheSeats(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	a, fa := n1.Connect(t, "alice")
	room := n1.JoinRoom(t, a, fa, "drain")
	got, err := n2.Reads.Room(context.Background(), room)
	require.NoError(t, err)
	require.Equal(t, []string{"alice"}, got.Members)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, n1.Shutdown(ctx))
	assert.Equal(t, realtime.CloseServiceReboot, realtimetest.CloseCode(t, fa))
	got, err = n2.Reads.Room(context.Background(), room)
	require.NoError(t, err)
	assert.Empty(t, got.Members, "the drained node freed the seat it alone held")
	_, err = n1.Chat.Connect(realtime.Principal{User: "late", Session: "s"}, "", testkit.NewTransport())
	assert.ErrorIs(t, err, realtime.ErrDraining)
}

func TestKickAndBanCloseEveryConnectionOfTheUser(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	_, fk := n1.Connect(t, "kevin")
	_, fb := n1.Connect(t, "bart")
	require.NoError(t, n2.Services.Moderation.Kick(context.Background(), "kevin", "be nice"))
	code, reason := fk.Closed(t)
	assert.Equal(t, realtime.CloseKicked, code)
	assert.Equal(t, "be nice", reason)
	_, err := n2.Services.Moderation.Ban(context.Background(), "bart", time.Minute, "")
	require.NoError(t, err)
	assert.Equal(t, realtime.CloseBanned, realtimetest.CloseCode(t, fb))
	assert.ErrorIs(t, n1.Services.Moderated.Banned(context.Background(), "bart"), realtime.ErrBanned)
}
func TestQueuedSaysAreBoundedAndDroppedWhenTheClientCloses(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	n := startNode(t, r, "n1")
	ctx := context.Background()
	_, err := n.Services.Settings.Set(ctx, "rate.messages_per_second", json.RawMessage("10000"))
	require.NoError(t, err)
	a, fa := n.Connect(t, "alice")
	room := n.JoinRoom(t, a, fa, "flood")
	n.Say(t, a, fa, room, "warm", "w")

	r.Server.Pause(t)
	var queued atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			if err := n.Chat.Say(a, room, strings.Repeat("x", 1500), "f"+strconv.Itoa(i)); err != nil {
				done <- err
				return
			}
			queued.Add(1)
		}
	}()
	// The reader stops: at most the bound plus the batch in flight.
	time.Sleep(500 * time.Millisecond)
	stalled := queued.Load()
	time.Sleep(500 * time.Millisecond)
	assert.Equal(t, stalled, queued.Load(), "Say waits once the queue is full")
	assert.LessOrEqual(t, stalled, int64(realtime.MaxQueuedSays+realtime.MaxSayBatch))
	a.Close(realtime.CloseNormal, "")
	select {
	case err := <-done:
		assert.ErrorIs(t, err, realtime.ErrClientClosed, "the waiting reader is let go")
	case <-time.After(5 * time.Second):
		t.Fatal("Say still waits after the client closed")
	}
	r.Server.Resume(t)
	time.Sleep(time.Second) // the batch in flight lands
	msgs, err := n.Reads.History(ctx, chat.Viewer{}, room, "", 1000)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(msgs), 1+realtime.MaxSayBatch, "nothing of the dropped queue reached Redis")
	assert.Less(t, len(msgs), int(stalled)+1)
}

func TestRefusalsInTheWindowCloseTheClientAndMostCostNoRedisCall(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	n := startNode(t, r, "n1")
	ctx := context.Background()
	_, err := n.Services.Settings.Set(ctx, "rate.messages_per_second", json.RawMessage("0.1"))
	require.NoError(t, err)
	// (no matchers run on the core's test nodes: their rounds are scripts too)
	a, fa := n.Connect(t, "alice")
	room := n.JoinRoom(t, a, fa, "flood")
	n.Say(t, a, fa, room, "the one token", "ok")
	before := commandCalls(t, r, "evalsha")
	require.NoError(t, n.Chat.Say(a, room, "refused by Redis", "first"))
	fa.First(t, "error", func(m map[string]any) bool { return m["ref"] == "first" })
	for i := range 3 * realtime.AbuseLimit {
		if n.Chat.Say(a, room, "spam", fmt.Sprint("s", i)) != nil {
			break
		}
		if i%5 == 4 {
			a.SendEvent(protocol.Pong{}) // other traffic between refusals changes nothing
		}
	}
	assert.Equal(t, realtime.ClosePolicy, realtimetest.CloseCode(t, fa))
	refused := 0
	for _, m := range fa.All() {
		if m["type"] == "error" && m["code"] == "rate_limited" {
			refused++
		}
	}
	assert.Equal(t, realtime.AbuseLimit, refused, "closed at the %d-th refusal in the window", realtime.AbuseLimit)
	// the first refusal cost a send script; the rest none (a few background
	// scripts — presence, heartbeat — may run meanwhile)
	assert.LessOrEqual(t, commandCalls(t, r, "evalsha")-before, int64(5), "the refusals after the first were made without Redis")
}

func TestARESTPostTakesTheSameSendPath(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n := startNode(t, r, "n1")
	ctx := context.Background()
	w, fw := n.Connect(t, "wendy")
	room := n.JoinRoom(t, w, fw, "rest")
	p := realtime.Principal{User: "rita", Session: "rest-session-1"}
	joined, err := n.REST.JoinREST(ctx, p, "rest")
	require.NoError(t, err)
	require.Equal(t, room, joined.ID)
	msg, err := n.REST.Post(ctx, p, room, "from REST", "")
	require.NoError(t, err)
	fw.Wait(t, "the REST post", func([]map[string]any) bool { return len(fw.Messages(room)) == 1 })
	assert.Equal(t, []string{msg.ID}, fw.Messages(room))

	_, err = n.REST.Post(ctx, realtime.Principal{User: "nobody", Session: "s2"}, room, "x", "")
	assert.Equal(t, errcode.NotSeated, errcode.Of(err))
	_, err = n.REST.Post(ctx, p, room, "", "")
	assert.ErrorIs(t, err, realtime.ErrEmptyText, "checked before Redis")

	res, err := n.Polls.Poll(ctx, p, 0)
	require.NoError(t, err)
	assert.Contains(t, res.Dirty, "rooms")
	require.NoError(t, n.REST.LeaveREST(ctx, p, room))
	_, err = n.REST.Post(ctx, p, room, "after leaving", "")
	assert.Equal(t, errcode.NotSeated, errcode.Of(err), "a left session does not take its seat back")
}

func TestAPollSeesWhatWasSentSinceTheJoin(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n := startNode(t, r, "n1")
	ctx := context.Background()
	p := realtime.Principal{User: "polly", Session: "poll-session-1"}
	joined, err := n.REST.JoinREST(ctx, p, "poll")
	require.NoError(t, err)
	_, err = n.Polls.Poll(ctx, p, 0) // the join's marks
	require.NoError(t, err)
	w, fw := n.Connect(t, "wes")
	room := n.JoinRoom(t, w, fw, "poll")
	require.Equal(t, joined.ID, room)
	id := n.Say(t, w, fw, room, "for polly", "x")
	var res polls.PollResult
	require.Eventually(t, func() bool {
		res, err = n.Polls.Poll(ctx, p, 0)
		m, _ := res.Data["messages"].(map[string][]rooms.Message)
		return err == nil && len(m) > 0
	}, 10*time.Second, 20*time.Millisecond)
	msgs := res.Data["messages"].(map[string][]rooms.Message)[room]
	require.Len(t, msgs, 1)
	assert.Equal(t, id, msgs[0].ID)
	res, err = n.Polls.Poll(ctx, p, 0)
	require.NoError(t, err)
	assert.Empty(t, res.Dirty, "a clean poll after")
}

// TestANotDurableSayStillMarksTheRESTMembers: under message.durability
// "replica" with no replica to acknowledge, a say is stored and published
// but answered not_durable. It is in the room's history all the same, so
// the REST members must be marked for it: their polls skipped it before.
func TestANotDurableSayStillMarksTheRESTMembers(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{}) // a master without a replica
	n := startNode(t, r, "n1")
	ctx := context.Background()
	p := realtime.Principal{User: "nora", Session: "durable-session-1"}
	joined, err := n.REST.JoinREST(ctx, p, "durable")
	require.NoError(t, err)
	_, err = n.Polls.Poll(ctx, p, 0) // the join's marks
	require.NoError(t, err)
	_, err = n.Services.Settings.Set(ctx, "message.durability", []byte(`"replica"`))
	require.NoError(t, err)
	w, fw := n.Connect(t, "ned")
	room := n.JoinRoom(t, w, fw, "durable")
	require.Equal(t, joined.ID, room)
	require.NoError(t, n.Chat.Say(w, room, "stored, not replicated", "nd"))
	e := fw.First(t, "error", func(m map[string]any) bool { return m["ref"] == "nd" })
	assert.Equal(t, "not_durable", e["code"])
	var res polls.PollResult
	require.Eventually(t, func() bool {
		res, err = n.Polls.Poll(ctx, p, 0)
		m, _ := res.Data["messages"].(map[string][]rooms.Message)
		return err == nil && len(m[room]) == 1
	}, 10*time.Second, 20*time.Millisecond, "the REST member's poll sees the stored message")
	assert.Equal(t, "stored, not replicated", res.Data["messages"].(map[string][]rooms.Message)[room][0].Text)
}

// idleNode starts node n1 on a Redis of the test's own with users clients,
// named prefix and two digits, each seated in lobby prefix; it returns the
// Redis, the node and the room of the last seat.
func idleNode(t *testing.T, prefix string, users int) (*redistest.Redis, *realtimetest.Node, string) {
	t.Helper()
	r := redistest.Own(t, redistest.Options{})
	n := startNode(t, r, "n1")
	var room string
	for i := range users {
		c, f := n.Connect(t, fmt.Sprintf("%s%02d", prefix, i))
		room = n.JoinRoom(t, c, f, prefix)
	}
	return r, n, room
}

// TestIdleUsersAreKeptOnlineAThirdPerTick: a presence tick moves a third
// of the node's idle users forward in the online index (each such write
// takes the member out of the index's skip list and back), and three ticks
// move every one of them, each far enough ahead (presence's OnlineTTL) to
// outlive a lost write.
func TestIdleUsersAreKeptOnlineAThirdPerTick(t *testing.T) {
	t.Parallel()
	const users = 60
	r, n, _ := idleNode(t, "kept", users)
	ctx := context.Background()
	index := r.Prefix + ":presence:online"
	scores := func() map[string]float64 {
		zs, err := r.Client.ZRangeWithScores(ctx, index, 0, -1).Result()
		require.NoError(t, err)
		out := map[string]float64{}
		for _, z := range zs {
			out[z.Member.(string)] = z.Score
		}
		return out
	}
	require.Eventually(t, func() bool { return len(scores()) == users }, 15*time.Second, 50*time.Millisecond, "every user in the online index")
	// the tick after the users came wrote them all (they were new): start after it
	t0, _ := n.Chat.PresenceTicks()
	require.Eventually(t, func() bool { tick, _ := n.Chat.PresenceTicks(); return tick > t0 }, 15*time.Second, 20*time.Millisecond)

	moved := map[string]bool{}
	partial := false
	for range 3 {
		before := scores()
		t0, f0 := n.Chat.PresenceTicks()
		require.Eventually(t, func() bool { tick, _ := n.Chat.PresenceTicks(); return tick > t0 }, 15*time.Second, 20*time.Millisecond)
		after := scores()
		changed := 0
		for u, sc := range after {
			if sc != before[u] {
				moved[u] = true
				changed++
			}
		}
		if tick, fulls := n.Chat.PresenceTicks(); fulls == f0 && tick == t0+1 {
			t.Logf("a tick moved %d of %d idle users", changed, users)
			assert.Less(t, changed, users*2/3, "a tick moves about a third of the users")
			partial = true
		}
	}
	require.True(t, partial, "no presence tick without a full write in three")
	assert.Len(t, moved, users, "three ticks move every user")
	now := float64(time.Now().UnixMilli())
	ttl := n.Services.Presence.TTL()
	for u, sc := range scores() {
		assert.Greater(t, sc-now, float64(ttl.Milliseconds()), "%s is kept longer than a TTL ahead, to outlive a lost write", u)
	}
}

// TestAStartedNodeRewritesNoClaim: a node's first heartbeat answers in
// Start, before it serves anyone, so no presence tick after it writes
// every user again: users who join a new node are written by their joins
// alone. Before, a first beat that answered after the first tick made the
// next tick rewrite them all at once, which under a reconnect storm onto a
// new node timed out and was done again at the tick after.
func TestAStartedNodeRewritesNoClaim(t *testing.T) {
	t.Parallel()
	_, n, _ := idleNode(t, "storm", 20)
	t0, _ := n.Chat.PresenceTicks()
	require.Eventually(t, func() bool { tick, _ := n.Chat.PresenceTicks(); return tick >= t0+2 }, 30*time.Second, 20*time.Millisecond)
	_, fulls := n.Chat.PresenceTicks()
	assert.Zero(t, fulls, "presence ticks that wrote every user")
}

// TestIdleUsersCostRedisNoWritePerUser: a node's presence claims live with
// its run (package presence): idle users are written once, then kept by
// the node's heartbeat and one ZADD per thousand users per tick, not by a
// HSET and a PEXPIRE per user per tick. And when Redis loses everything,
// the next heartbeat finds the run unknown and the node writes its users
// again.
func TestIdleUsersCostRedisNoWritePerUser(t *testing.T) {
	t.Parallel()
	const users = 40
	r, n, room := idleNode(t, "idle", users)
	ctx := context.Background()
	online := func(user string) bool {
		st, err := n.Services.Presence.Get(ctx, user)
		return err == nil && st.Online && slices.Contains(st.Rooms, room)
	}
	require.Eventually(t, func() bool { return online("idle00") && online("idle39") }, 15*time.Second, 50*time.Millisecond)

	hsets := func() int64 { return commandCalls(t, r, "hset") }
	// A tick after a fresh heartbeat writes everyone (the first, when
	// nothing was written by this run yet; on a loaded machine the first
	// heartbeat may answer after the first tick): measure a tick that did
	// not, the first of at most four.
	var written int64
	measured := false
	for range 4 {
		t0, f0 := n.Chat.PresenceTicks()
		before := hsets()
		require.Eventually(t, func() bool { tick, _ := n.Chat.PresenceTicks(); return tick > t0 }, 15*time.Second, 20*time.Millisecond)
		written = hsets() - before
		if tick, fulls := n.Chat.PresenceTicks(); fulls == f0 && tick == t0+1 {
			measured = true
			break
		}
	}
	require.True(t, measured, "no presence tick without a full write in four")
	// Per tick: the heartbeat's two HSETs every 5 s and the rotation's
	// 1/60 of the users; per-user renewal would be 40 per tick.
	assert.Less(t, written, int64(users/2), "HSETs in one presence tick with %d idle users", users)
	assert.True(t, online("idle00"), "still online, kept by the heartbeat")

	require.NoError(t, r.Client.FlushAll(ctx).Err())
	assert.False(t, online("idle00"), "Redis lost it")
	require.Eventually(t, func() bool { return online("idle00") && online("idle39") }, 2*n.Services.Presence.TTL()/3+10*time.Second, 100*time.Millisecond,
		"the heartbeat after the loss is fresh, and the next tick writes every user again")
}

// TestADepartedUserIsWrittenOfflineOnce: a WebSocket's Disconnect writes
// its user offline at once (presence_offline: one HGETALL each); the next
// presence tick, which finds the user gone since the last, does not write
// it again. It did: twice the script calls for every user that left, and
// in a benchmark the second came tens of seconds later, in the next run.
func TestADepartedUserIsWrittenOfflineOnce(t *testing.T) {
	t.Parallel()
	const users = 20
	r := redistest.Own(t, redistest.Options{})
	n := startNode(t, r, "n1")
	ctx := context.Background()
	var clients []*realtime.Client
	for i := range users {
		c, f := n.Connect(t, fmt.Sprintf("gone%02d", i))
		n.JoinRoom(t, c, f, "gone")
		clients = append(clients, c)
	}
	// A tick sees them all here.
	t0, _ := n.Chat.PresenceTicks()
	require.Eventually(t, func() bool { tick, _ := n.Chat.PresenceTicks(); return tick > t0 }, 15*time.Second, 20*time.Millisecond)
	hgetalls := func() int64 { return commandCalls(t, r, "hgetall") }
	before := hgetalls()
	for _, c := range clients {
		n.Chat.Disconnect(ctx, c)
	}
	t1, _ := n.Chat.PresenceTicks()
	require.Eventually(t, func() bool { tick, _ := n.Chat.PresenceTicks(); return tick > t1+1 }, 30*time.Second, 20*time.Millisecond)
	// Each once, by its Disconnect. A tick that runs while a Disconnect is
	// between leaving the hub and its write writes that user too: on a
	// loaded machine a few may be written twice, never all.
	written := hgetalls() - before
	assert.GreaterOrEqual(t, written, int64(users))
	assert.LessOrEqual(t, written, int64(users+users/4), "written offline again by the ticks after (%d for %d users)", written, users)
	st, err := n.Services.Presence.Get(ctx, "gone00")
	require.NoError(t, err)
	assert.False(t, st.Online)
}

// TestAFailedOfflineIsWrittenAgain: a user whose offline write failed is
// written offline at the next presence tick, even when it was in no
// tick's snapshot (it came and went within one tick): its claim lives with
// the node's run, so nothing else would ever drop it.
func TestAFailedOfflineIsWrittenAgain(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n := startNode(t, r, "n1")
	// a claim with a run counts once the run beats
	require.Eventually(t, func() bool { return n.Core.LiveRuns() }, 15*time.Second, 20*time.Millisecond, "a heartbeat answered")
	require.NoError(t, n.Services.Presence.Touch(ctx, "n1", []presence.UserState{{User: "ghost"}}))
	st, err := n.Services.Presence.Get(ctx, "ghost")
	require.NoError(t, err)
	require.True(t, st.Online, "its claim, as its connect wrote it")
	n.Chat.PresenceFailed("ghost") // as when the offline write of its disconnect failed
	require.Eventually(t, func() bool {
		st, err := n.Services.Presence.Get(ctx, "ghost")
		return err == nil && !st.Online
	}, n.Services.Presence.TTL()/3+10*time.Second, 100*time.Millisecond, "the next tick writes it offline")
}

// commandCalls is how many times Redis ran the command name (lower case)
// since its start, inside scripts too (INFO commandstats).
func commandCalls(t testing.TB, r *redistest.Redis, name string) int64 {
	t.Helper()
	return redistest.Calls(t, r.Client, name)
}
