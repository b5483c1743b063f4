package deploy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/chatdtest"
)

// TestPausedNodeSkipsNoMessageAfterAJoin is issue #38's reproduction on
// real processes: three members on node A join a room, A is paused
// (SIGSTOP) for 3 s while a sender on node B sends 600 says (all acked),
// then goes on. Every member must get all 600, once each, in order.
//
// The skip needed a join whose history read ran late: the server sends
// "joined" and only then reads the room's latest 50 messages; when the
// node stalled in between, the read found the 600 and the members got
// the last 50 of them, the 550 before dropped as older than the page (3
// runs of 16 on a busy 2-core machine). A reaches Redis through a proxy
// that holds each chunk for 250 ms while the members join, so the read
// sent with "joined" lands after the says, every run, as the scheduler
// made it land now and then.
func TestPausedNodeSkipsNoMessageAfterAJoin(t *testing.T) {
	skipShort(t)
	c := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	a, b := c.Nodes[0], c.Nodes[1]
	proxy := startProxy(t, c.Redis.Addrs[0])
	a.Args = []string{"--redis", "redis://" + proxy.addr() + "/0"}
	a.Restart()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, err := sdkAdmin(t, c).SetSetting(ctx, "rate.messages_per_second", 10000)
	require.NoError(t, err)

	sender := connectMember(ctx, t, sdkUser(ctx, t, []string{b.URL}, "sender"))
	room, err := sender.conn.Join(ctx, "gap")
	require.NoError(t, err)
	var members []*sdkMember
	for i := range 3 {
		members = append(members, connectMember(ctx, t, sdkUser(ctx, t, []string{a.URL}, fmt.Sprintf("m%d", i))))
	}

	// the members join while A's Redis round trips are slow: each join's
	// history read is sent with its "joined" and reaches Redis 250 ms on
	proxy.setDelay(250 * time.Millisecond)
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := m.conn.Join(ctx, "gap")
			assert.NoError(t, err, m.user)
			assert.Equal(t, room.ID, r.ID, m.user)
		}()
	}
	wg.Wait()
	require.False(t, t.Failed())
	a.Pause()
	stopped := time.Now()
	proxy.setDelay(0)

	const n = 600
	texts := make([]string, n)
	for k := range texts {
		texts[k] = fmt.Sprintf("g%d", k)
	}
	work := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for text := range work {
				for { // the rate setting may not have reached B yet
					_, err := sender.conn.Say(ctx, room.ID, text)
					if err == nil || ctx.Err() != nil {
						assert.NoError(t, err, text)
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	for _, text := range texts {
		work <- text
	}
	close(work)
	wg.Wait()
	require.False(t, t.Failed(), "every say acked")
	t.Logf("600 says acked %s after the pause", time.Since(stopped).Round(time.Millisecond))
	time.Sleep(time.Until(stopped.Add(3 * time.Second)))
	a.Resume()

	for _, m := range members {
		m.waitTexts(t, room.ID, texts, time.Minute)
		msgs := m.messages(room.ID)
		for k := 1; k < len(msgs); k++ {
			require.Less(t, msgs[k-1].ID, msgs[k].ID, "%s: messages once each, in order", m.user)
		}
		assert.Len(t, msgs, n, m.user)
		m.mu.Lock()
		assert.Zero(t, m.gaps, "%s was told of a gap", m.user)
		assert.Zero(t, m.discs, "%s was disconnected: %v", m.user, m.lastDisc)
		m.mu.Unlock()
	}
}
