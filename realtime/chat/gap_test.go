package chat_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
)

// stallJoinReads is a go-redis hook that holds every pipeline reading a
// join's history (XREVRANGE … COUNT JoinHistory) until release is closed,
// and reports the first one on held: the node stalls exactly between a
// join's "joined" and its history read.
type stallJoinReads struct {
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stallJoinReads) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *stallJoinReads) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (s *stallJoinReads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			args := c.Args()
			if strings.EqualFold(fmt.Sprint(args[0]), "xrevrange") && fmt.Sprint(args[len(args)-1]) == strconv.Itoa(realtime.JoinHistory) {
				s.once.Do(func() { close(s.held) })
				select {
				case <-s.release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return next(ctx, cmds)
	}
}

// TestAJoinWhoseHistoryReadStallsGetsEveryMessageAfterJoined is the exact
// path of issue #38 in-process: alice joins on n1 and hears "joined"; n1
// stalls before her history read while bob sends 200 messages from n2;
// then the read runs. She used to get the latest 50 of the 200, the other
// 150 (held while she caught up) dropped as older than that page.
func TestAJoinWhoseHistoryReadStallsGetsEveryMessageAfterJoined(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	stall := &stallJoinReads{held: make(chan struct{}), release: make(chan struct{})}
	n1 := startNode(t, r, "n1", func(c *realtime.Config) { c.Redis.AddHook(stall) })
	n2 := startNode(t, r, "n2")
	b, fb := n2.Connect(t, "bob")
	room := n2.JoinRoom(t, b, fb, "stall")

	a, fa := n1.Connect(t, "alice")
	joined := make(chan error, 1)
	go func() { joined <- n1.Chat.Join(context.Background(), a, "stall") }()
	fa.First(t, "joined", nil)
	<-stall.held // alice is subscribed, told joined, and her read waits
	var sent []string
	for i := range 200 {
		sent = append(sent, n2.Say(t, b, fb, room, fmt.Sprint("m", i), fmt.Sprint("r", i)))
	}
	close(stall.release)
	require.NoError(t, <-joined)
	live := n2.Say(t, b, fb, room, "live", "l")
	sent = append(sent, live)
	fa.Wait(t, "the live message", func([]map[string]any) bool { return slices.Contains(fa.Messages(room), live) })
	assert.Equal(t, sent, fa.Messages(room), "every message sent after joined, once, in order")
}

// TestAGapNoReadCanFillIsToldAndCounted: a node's pub/sub connection
// drops while its room's history lost what the node delivered last (trimmed
// past it, or Redis lost the stream). The gap fill cannot read after it:
// every local member is told (resume_gap, naming the room), the gap is
// counted (chatd_room_gaps_unfilled_total), and the room goes on live. It
// used to re-read the latest window and say nothing.
func TestAGapNoReadCanFillIsToldAndCounted(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	reg := prometheus.NewRegistry()
	n1 := startNode(t, r, "n1")
	n2 := startNode(t, r, "n2", func(c *realtime.Config) { c.Registerer = reg })
	a, fa := n1.Connect(t, "alice")
	b, fb := n2.Connect(t, "bob")
	room := n1.JoinRoom(t, a, fa, "lost")
	n2.JoinRoom(t, b, fb, "lost")
	n1.Say(t, a, fa, room, "before", "r0")
	fb.Wait(t, "the first message", func([]map[string]any) bool { return len(fb.Messages(room)) == 1 })

	ctx := context.Background()
	keys, err := r.Client.Keys(ctx, r.Prefix+"*history*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.NoError(t, r.Client.Del(ctx, keys[0]).Err()) // Redis lost the stream
	require.NoError(t, r.Client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())

	e := fb.First(t, "error", func(m map[string]any) bool { return m["code"] == "resume_gap" })
	assert.Equal(t, room, e["room"])
	unfilled := func() float64 {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "chatd_room_gaps_unfilled_total" {
				return mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return 0
	}
	assert.Equal(t, float64(1), unfilled())
	after := n1.Say(t, a, fa, room, "after", "r1")
	fb.Wait(t, "live again", func([]map[string]any) bool { return slices.Contains(fb.Messages(room), after) })
}

// TestARoomRedisLostTellsItsSeatedMembersSo: Redis loses its data
// (FLUSHALL here; a failover to a replica that had not synced does the
// same). A say to the room is unknown_room; at the next seat renewal each
// member still in the room is told not_seated naming the room, with a
// message that says the room is gone (it said the seat "expired and was
// taken"), and leaves it on its node; a resume is unknown_room. The room
// is not recreated: the members must join the lobby again.
func TestARoomRedisLostTellsItsSeatedMembersSo(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	n1 := startNode(t, r, "n1")
	n2 := startNode(t, r, "n2")
	a, fa := n1.Connect(t, "alice")
	b, fb := n2.Connect(t, "bob")
	room := n1.JoinRoom(t, a, fa, "flushed")
	n2.JoinRoom(t, b, fb, "flushed")
	n1.Say(t, a, fa, room, "before", "r0")
	ctx := context.Background()
	require.NoError(t, r.Client.FlushAll(ctx).Err())

	require.NoError(t, n2.Chat.Say(b, room, "after", "r1"))
	e := fb.First(t, "error", func(m map[string]any) bool { return m["ref"] == "r1" })
	assert.Equal(t, "unknown_room", e["code"])

	n1.Chat.RenewSeats(ctx)
	e = fa.First(t, "error", func(m map[string]any) bool { return m["code"] == "not_seated" })
	assert.Equal(t, room, e["room"])
	assert.Contains(t, e["message"], "no longer exists")
	assert.False(t, a.InRoom(room))
	assert.ErrorIs(t, n1.Chat.Resume(ctx, a, room, ""), rooms.ErrUnknownRoom)
}
