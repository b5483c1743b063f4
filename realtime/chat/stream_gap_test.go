package chat_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/chat"
)

// stallCursorReads is a go-redis hook that, once armed, holds the next
// read of a session's rooms (HGETALL of its cursor) until release is
// closed, and reports it on held: a stream's node stalls between the
// session's REST join (the seat taken, the join point kept in the cursor)
// and the stream entering the room and reading its history.
type stallCursorReads struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stallCursorReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *stallCursorReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		args := c.Args()
		if s.armed.Load() && strings.EqualFold(fmt.Sprint(args[0]), "hgetall") && strings.Contains(fmt.Sprint(args[1]), "cursor") {
			s.once.Do(func() { close(s.held) })
			select {
			case <-s.release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return next(ctx, c)
	}
}

func (s *stallCursorReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestAStreamThatEntersARoomLateGetsEveryMessageSinceTheSessionJoined is
// issue #38's race on the SSE path: a session joins a room over REST on
// n2 while its stream is open on n1; n1 stalls before the stream enters
// the room while bob sends 200 messages; then it enters. The stream used
// to enter as a join from where it went live — the latest 50 of the 200,
// the other 150 skipped without a word — although the session was in the
// room, and told so, before any of them was sent.
func TestAStreamThatEntersARoomLateGetsEveryMessageSinceTheSessionJoined(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	stall := &stallCursorReads{held: make(chan struct{}), release: make(chan struct{})}
	n1 := startNode(t, r, "n1", func(c *realtime.Config) { c.Redis.AddHook(stall) })
	n2 := startNode(t, r, "n2")
	ctx := context.Background()
	p := realtime.Principal{User: "sam", Session: "stream-session-1"}
	_, fs := n1.OpenStream(t, p, chat.Position{})

	stall.armed.Store(true)
	joined, err := n2.REST.JoinREST(ctx, p, "late")
	require.NoError(t, err)
	<-stall.held // n1 heard of the join; the stream has not entered yet
	b, fb := n2.Connect(t, "bob")
	room := n2.JoinRoom(t, b, fb, "late")
	require.Equal(t, joined.ID, room)
	var sent []string
	for i := range 200 {
		sent = append(sent, n2.Say(t, b, fb, room, fmt.Sprint("m", i), fmt.Sprint("r", i)))
	}
	close(stall.release)
	fs.First(t, "joined", nil)
	live := n2.Say(t, b, fb, room, "live", "l")
	sent = append(sent, live)
	fs.Wait(t, "the live message", func([]map[string]any) bool { return slices.Contains(fs.Messages(room), live) })
	assert.Equal(t, sent, fs.Messages(room), "every message sent after the session joined, once, in order")
}

// TestAStreamReopenedWithAPositionGetsEveryMessageOfARoomItNamesNot: the
// stream delivered a message of one room and none yet of another (empty
// when the session joined it), so its position names only the first.
// While it is away 200 messages reach the second; reopened with that
// position it must get all of them. It used to enter the room the
// position does not name as a join: the latest 50.
func TestAStreamReopenedWithAPositionGetsEveryMessageOfARoomItNamesNot(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1 := startNode(t, r, "n1")
	n2 := startNode(t, r, "n2")
	ctx := context.Background()
	p := realtime.Principal{User: "sam", Session: "stream-session-2"}
	one, err := n1.REST.JoinREST(ctx, p, "named")
	require.NoError(t, err)
	two, err := n1.REST.JoinREST(ctx, p, "unnamed")
	require.NoError(t, err)
	s, fs := n1.OpenStream(t, p, chat.Position{})
	fs.Wait(t, "both rooms entered", func(fr []map[string]any) bool {
		n := 0
		for _, m := range fr {
			if m["type"] == "joined" {
				n++
			}
		}
		return n == 2
	})
	b, fb := n2.Connect(t, "bob")
	require.Equal(t, one.ID, n2.JoinRoom(t, b, fb, "named"))
	require.Equal(t, two.ID, n2.JoinRoom(t, b, fb, "unnamed"))
	first := n2.Say(t, b, fb, one.ID, "hello", "h")
	fs.Wait(t, "the first message", func([]map[string]any) bool { return slices.Contains(fs.Messages(one.ID), first) })
	s.Close(realtime.CloseAbnormal, "")
	<-s.Finished()

	var sent []string
	for i := range 200 {
		sent = append(sent, n2.Say(t, b, fb, two.ID, fmt.Sprint("m", i), fmt.Sprint("r", i)))
	}
	_, fs2 := n2.OpenStream(t, p, chat.Position{one.ID: first})
	live := n2.Say(t, b, fb, two.ID, "live", "l")
	sent = append(sent, live)
	fs2.Wait(t, "the live message", func([]map[string]any) bool { return slices.Contains(fs2.Messages(two.ID), live) })
	assert.Equal(t, sent, fs2.Messages(two.ID), "every message the stream missed, once, in order")
	assert.Empty(t, fs2.Messages(one.ID), "nothing again of the room the position names")
}

// TestAStreamWhoseHistoryReadStallsGetsEveryMessageAfterItWentLive: the
// WebSocket race of issue #38 on a stream: it enters its session's room
// at the open and is told joined; its node stalls before the history read
// while 200 messages pass from another node. The stream shares the join's
// rule (enter): every one of them comes, once, in order.
func TestAStreamWhoseHistoryReadStallsGetsEveryMessageAfterItWentLive(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	stall := &stallJoinReads{held: make(chan struct{}), release: make(chan struct{})}
	n1 := startNode(t, r, "n1", func(c *realtime.Config) { c.Redis.AddHook(stall) })
	n2 := startNode(t, r, "n2")
	ctx := context.Background()
	p := realtime.Principal{User: "sam", Session: "stream-session-3"}
	joined, err := n2.REST.JoinREST(ctx, p, "stalled")
	require.NoError(t, err)
	b, fb := n2.Connect(t, "bob")
	room := n2.JoinRoom(t, b, fb, "stalled")
	require.Equal(t, joined.ID, room)

	fs := testkit.NewTransport()
	opened := make(chan *realtime.Client, 1)
	go func() {
		c, err := n1.REST.Stream(ctx, p, "", fs, chat.Position{})
		assert.NoError(t, err)
		opened <- c
	}()
	fs.First(t, "joined", nil)
	<-stall.held // the stream went live, was told joined, and its read waits
	var sent []string
	for i := range 200 {
		sent = append(sent, n2.Say(t, b, fb, room, fmt.Sprint("m", i), fmt.Sprint("r", i)))
	}
	close(stall.release)
	s := <-opened
	require.NotNil(t, s)
	t.Cleanup(func() { s.Close(realtime.CloseNormal, ""); n1.Chat.Disconnect(context.Background(), s) })
	live := n2.Say(t, b, fb, room, "live", "l")
	sent = append(sent, live)
	fs.Wait(t, "the live message", func([]map[string]any) bool { return slices.Contains(fs.Messages(room), live) })
	assert.Equal(t, sent, fs.Messages(room), "every message sent after joined, once, in order")
}
