package deploy

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
)

// TestPausedRedisAppliesEveryAckedWriteOnce is issue #27's reproduction on
// three real chatd processes and a real redis-server: Redis is stopped
// (SIGSTOP) for 3.2 s — longer than the nodes' 2 s read timeout, so
// go-redis sends every command in flight again on a new connection and
// Redis, once resumed, runs both copies — while 50 WebSocket says (from
// five connections on three nodes) and 20 REST score increments are in
// flight. Alice's WebSocket is cut during
// the pause (through a proxy the test owns): her Conn reconnects to
// another node and sends every unacknowledged say again with its ref.
// Then:
//   - every say is acked, and its id is the one message with its text in
//     the history: a copy run twice by Redis, or re-sent with the same ref
//     after the reconnect, answered the first message's id and stored
//     nothing;
//   - each member that stayed connected got each say exactly once, in id
//     order;
//   - a say acked, then sent again with its ref on a new connection of
//     the session to another node, answers the first id and stores
//     nothing;
//   - each increment, acked at once or retried by the client with its
//     Idempotency-Key until acked, was applied exactly once: the final
//     score is the number of increments, and posting acked keys again
//     changes nothing.
func TestPausedRedisAppliesEveryAckedWriteOnce(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := chatdtest.Start(t, chatdtest.Options{Nodes: 3})
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := sdkAdmin(t, c)
	_, err := adm.SetSetting(ctx, "rate.messages_per_second", 1000)
	require.NoError(t, err)
	_, err = adm.SetSetting(ctx, "limit.score_posts_per_user_per_minute", 0)
	require.NoError(t, err)

	// alice reaches n1 through a proxy the test can cut, then n2; four
	// more sayers, one connection each, are on every node: each connection
	// has one pipeline in flight when Redis stops
	wsProxy := startProxy(t, n1.Addr())
	alice := connectMember(ctx, t, sdkUser(ctx, t, []string{"http://" + wsProxy.addr(), n2.URL}, "alice"))
	sayers := []*sdkMember{alice}
	for i := range 4 {
		sayers = append(sayers, connectMember(ctx, t, sdkUser(ctx, t, []string{c.URLs()[i%3]}, fmt.Sprintf("sayer%d", i))))
	}
	bob := connectMember(ctx, t, sdkUser(ctx, t, []string{n2.URL}, "bob"))
	carol := connectMember(ctx, t, sdkUser(ctx, t, []string{n3.URL}, "carol"))
	room, err := alice.conn.Join(ctx, "exact")
	require.NoError(t, err)
	for _, m := range append(sayers[1:], bob, carol) {
		r, err := m.conn.Join(ctx, "exact")
		require.NoError(t, err)
		require.Equal(t, room.ID, r.ID, "one room")
	}
	scorer := sdkUser(ctx, t, []string{n2.URL, n3.URL}, "scorer")
	_, err = scorer.PostScore(ctx, "exact", client.Score{Player: "p1", Score: 0, Mode: client.ScoreIncr})
	require.NoError(t, err, "warm-up: the board exists, the scripts are loaded")
	_, err = alice.conn.Say(ctx, room.ID, "warm-up")
	require.NoError(t, err)
	bob.waitTexts(t, room.ID, []string{"warm-up"}, 30*time.Second)
	carol.waitTexts(t, room.ID, []string{"warm-up"}, 30*time.Second)
	sendsBefore := commandCalls(t, c, "evalsha")

	const says, incrs = 50, 20
	texts := make([]string, says)
	for i := range texts {
		texts[i] = fmt.Sprintf("exact-%02d", i)
	}
	ids := make([]string, says)
	sayErrs := make([]error, says)
	incrErrs := make([]error, incrs)
	incrAnswers := make([]client.Entry, incrs)
	var wg sync.WaitGroup

	c.Redis.Server.Pause(t)
	paused := time.Now()
	for i := range says {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], sayErrs[i] = sayers[i%len(sayers)].conn.Say(ctx, room.ID, texts[i])
		}()
	}
	for i := range incrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			incrAnswers[i], incrErrs[i] = scorer.PostScore(ctx, "exact", client.Score{Player: "p1", Score: 1, Mode: client.ScoreIncr},
				client.WithIdempotencyKey(fmt.Sprintf("incr-%02d", i)))
		}()
	}
	time.Sleep(time.Second) // the says reached n1 and wait on Redis
	cut := wsProxy.cut()
	time.Sleep(3200*time.Millisecond - time.Since(paused))
	c.Redis.Server.Resume(t)
	t.Logf("Redis paused for %s; alice's WebSocket cut (%d sockets) 1 s into the pause", time.Since(paused).Round(time.Millisecond), cut)
	wg.Wait()

	t.Log("every say is acked, through the reconnect")
	{
		for i, err := range sayErrs {
			require.NoError(t, err, "say %d", i)
		}
		assert.GreaterOrEqual(t, alice.conn.Stats().Connects, 2, "alice reconnected")
		assert.Len(t, slices.Compact(slices.Sorted(slices.Values(ids))), says, "one id per say")
	}
	t.Log("the increments that failed are retried with their key until acked")
	{
		failed := 0
		for i, err := range incrErrs {
			if err == nil {
				continue
			}
			failed++
			t.Logf("incr %d failed at first: %v", i, err)
			require.Eventually(t, func() bool {
				incrAnswers[i], err = scorer.PostScore(ctx, "exact", client.Score{Player: "p1", Score: 1, Mode: client.ScoreIncr},
					client.WithIdempotencyKey(fmt.Sprintf("incr-%02d", i)))
				return err == nil
			}, 30*time.Second, 200*time.Millisecond)
		}
		t.Logf("%d of %d increments failed during the pause and were retried with their key", failed, incrs)
	}
	t.Logf("Redis ran %d scripts for 50 says, 20 incrs and their retries", commandCalls(t, c, "evalsha")-sendsBefore)

	t.Log("the history holds each say once, under its acked id")
	{
		hist, err := alice.cl.History(ctx, room.ID, client.HistoryOptions{Limit: 1000})
		require.NoError(t, err)
		byText := map[string][]string{}
		for _, m := range hist {
			byText[m.Text] = append(byText[m.Text], m.ID)
		}
		for i, text := range texts {
			assert.Equal(t, []string{ids[i]}, byText[text], "%s: stored once, under the id of its ack", text)
		}
	}
	t.Log("bob and carol got each say once, in order")
	{
		for _, m := range []*sdkMember{bob, carol} {
			m.waitTexts(t, room.ID, texts, 30*time.Second)
		}
		_, err := alice.conn.Say(ctx, room.ID, "the end")
		require.NoError(t, err)
		for _, m := range []*sdkMember{bob, carol} {
			m.waitTexts(t, room.ID, []string{"the end"}, 30*time.Second)
			got := m.messages(room.ID)
			n := textCounts(got)
			for _, text := range texts {
				assert.Equal(t, 1, n[text], "%s got %q once", m.user, text)
			}
			assert.True(t, slices.IsSortedFunc(got, func(a, b client.Message) int { return compareStrings(a.ID, b.ID) }), "%s: in id order", m.user)
		}
	}
	t.Log("a say acked, then sent again with its ref on a new connection to another node, is the same message")
	{
		first := rawSay(ctx, t, n1.Addr(), alice.cl.Token(), room.ID, "again-1", "said once")
		before, err := alice.cl.History(ctx, room.ID, client.HistoryOptions{Limit: 1000})
		require.NoError(t, err)
		again := rawSay(ctx, t, n3.Addr(), alice.cl.Token(), room.ID, "again-1", "said once")
		assert.Equal(t, first, again, "the ack of the resend carries the first message's id")
		after, err := alice.cl.History(ctx, room.ID, client.HistoryOptions{Limit: 1000})
		require.NoError(t, err)
		assert.Equal(t, before, after, "the resend stored nothing")
		assert.Equal(t, 1, textCounts(after)["said once"])
	}
	t.Log("each increment is applied once, and its key again changes nothing")
	{
		e, err := scorer.Player(ctx, "exact", "p1")
		require.NoError(t, err)
		assert.Equal(t, float64(incrs), e.Score, "20 increments of 1")
		for i := range 5 {
			again, err := scorer.PostScore(ctx, "exact", client.Score{Player: "p1", Score: 1, Mode: client.ScoreIncr},
				client.WithIdempotencyKey(fmt.Sprintf("incr-%02d", i)))
			require.NoError(t, err)
			assert.Equal(t, incrAnswers[i], again, "a repeated key answers its first answer")
		}
		e, err = scorer.Player(ctx, "exact", "p1")
		require.NoError(t, err)
		assert.Equal(t, float64(incrs), e.Score, "and adds nothing")
		scores := map[float64]bool{}
		for _, a := range incrAnswers {
			scores[a.Score] = true
		}
		assert.Len(t, scores, incrs, "each increment answered a score of its own: 1 to 20")
	}
}

// rawSay sends a say with ref on a new WebSocket of token's session to
// addr, returns the id of its ack, and closes the socket.
func rawSay(ctx context.Context, t *testing.T, addr, token, room, ref, text string) string {
	t.Helper()
	u := url.URL{Scheme: "ws", Host: addr, Path: "/ws", RawQuery: "token=" + url.QueryEscape(token)}
	ws, resp, err := wsclient.Dial(ctx, u.String(), nil)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	require.NoError(t, err)
	defer ws.Close()
	require.NoError(t, ws.Send(protocol.Say{Room: room, Ref: ref, Text: text}))
	for {
		ev, err := ws.Next(30*time.Second, protocol.TypeAck, protocol.TypeError)
		require.NoError(t, err, "waiting for the ack of %s", ref)
		switch f := ev.ServerEvent.(type) {
		case protocol.Ack:
			if f.Ref == ref {
				return f.ID
			}
		case protocol.ErrorEvent:
			require.NotEqual(t, ref, f.Ref, "%s answered %s", ref, f.Code)
		}
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// commandCalls is the server's count of calls of cmd (INFO commandstats).
func commandCalls(t testing.TB, c *chatdtest.Cluster, cmd string) int64 {
	t.Helper()
	return redistest.Calls(t, c.Redis.Client, cmd)
}
