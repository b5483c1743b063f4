package realtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
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
			if strings.EqualFold(fmt.Sprint(args[0]), "xrevrange") && fmt.Sprint(args[len(args)-1]) == strconv.Itoa(JoinHistory) {
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
	n1 := startNode(t, r, "n1", func(c *Config) { c.Redis.AddHook(stall) })
	n2 := startNode(t, r, "n2")
	b, fb := n2.connect(t, "bob")
	room := n2.joinRoom(t, b, fb, "stall")

	a, fa := n1.connect(t, "alice")
	joined := make(chan error, 1)
	go func() { joined <- n1.Chat.Join(context.Background(), a, "stall") }()
	fa.first(t, "joined", nil)
	<-stall.held // alice is subscribed, told joined, and her read waits
	var sent []string
	for i := range 200 {
		sent = append(sent, n2.say(t, b, fb, room, fmt.Sprint("m", i), fmt.Sprint("r", i)))
	}
	close(stall.release)
	require.NoError(t, <-joined)
	live := n2.say(t, b, fb, room, "live", "l")
	sent = append(sent, live)
	fa.wait(t, "the live message", func([]map[string]any) bool { return slices.Contains(fa.messages(room), live) })
	assert.Equal(t, sent, fa.messages(room), "every message sent after joined, once, in order")
}
