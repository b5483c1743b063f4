package client_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/internal/chatdtest"
)

// A Conn whose node drains (SIGTERM: 1012) or dies (SIGKILL: the TCP
// connection is reset) moves to another node and resumes both its rooms
// while another client keeps sending to them: it sees every message of
// each room once, in order, the ones sent while it was away included; its
// own says made before and during the outage all come back acked.
func TestReconnectResumesEveryRoomWithoutGapOrDuplicate(t *testing.T) {
	skipShort(t)
	for _, fault := range []string{"sigterm", "sigkill"} {
		t.Run(fault, func(t *testing.T) { testReconnect(t, fault) })
	}
}

func testReconnect(t *testing.T, fault string) {
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 3})
	ctx := ctxT(t)
	adm := adminOf(t, cl)
	_, err := adm.SetSetting(ctx, "rate.messages_per_second", 1000)
	require.NoError(t, err)

	// The receiver's next URL waits for the test: the reconnect is held
	// until the sender has sent more while the receiver is away, so the
	// resume must replay them.
	urls := cl.URLs()
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	var asked atomic.Int32
	rx := newClient(t, "rx", client.Config{NodeURLs: urls, NextURL: func(failed string) string {
		asked.Add(1)
		<-gate
		return urls[(slices.Index(urls, failed)+1)%len(urls)]
	}})
	tx := newClient(t, "tx", client.Config{BaseURL: cl.Nodes[2].URL})
	crx, rrx := connect(t, rx, client.ConnOptions{})
	ctx2, _ := connect(t, tx, client.ConnOptions{})
	require.Equal(t, "n1", crx.Node())
	t.Cleanup(open) // runs before the Conns' Close, which waits for NextURL

	var rooms []string
	for _, lobby := range []string{"ra", "rb"} {
		r, err := crx.Join(ctx, lobby)
		require.NoError(t, err)
		_, err = ctx2.Join(ctx, lobby)
		require.NoError(t, err)
		rooms = append(rooms, r.ID)
	}
	// the setting reached the sender's node
	require.Eventually(t, func() bool {
		s, err := tx.Settings(ctx)
		return err == nil && s.Values["rate.messages_per_second"] == float64(1000)
	}, wait, 20*time.Millisecond)

	// the sender: numbered messages to both rooms, paced, until total
	const total = 400
	var sent atomic.Int32
	senderDone := make(chan error, 1)
	go func() {
		for i := range total {
			if _, err := ctx2.Say(ctx, rooms[i%2], fmt.Sprintf("tx %d", i)); err != nil {
				senderDone <- fmt.Errorf("tx say %d: %w", i, err)
				return
			}
			sent.Add(1)
			time.Sleep(5 * time.Millisecond)
		}
		senderDone <- nil
	}()
	// the receiver says too, before, during and after the outage
	var (
		rxMu   sync.Mutex
		rxIDs  []string
		rxErrs []error
	)
	rxStop := make(chan struct{})
	rxDone := make(chan struct{})
	go func() {
		defer close(rxDone)
		var wg sync.WaitGroup
		for i := 0; ; i++ {
			select {
			case <-rxStop:
				wg.Wait()
				return
			case <-time.After(40 * time.Millisecond):
			}
			wg.Go(func() { // concurrent: a say made while away waits for the reconnect
				id, err := crx.Say(ctx, rooms[0], fmt.Sprintf("rx %d", i))
				rxMu.Lock()
				defer rxMu.Unlock()
				if err != nil {
					rxErrs = append(rxErrs, err)
				} else {
					rxIDs = append(rxIDs, id)
				}
			})
		}
	}()

	waitSent := func(n int32) {
		t.Helper()
		require.Eventually(t, func() bool { return sent.Load() >= n }, wait, 5*time.Millisecond, "the sender stalled at %d", sent.Load())
	}
	waitSent(100)
	victim := cl.Nodes[0]
	var want error
	switch fault {
	case "sigterm":
		require.NoError(t, victim.Signal(syscall.SIGTERM))
		want = client.ErrDraining
	case "sigkill":
		victim.Kill()
		want = client.ErrConnLost
	}
	rrx.waitFor(t, "the disconnect", func(evs []client.Event) bool {
		return has(evs, func(e client.DisconnectedEvent) bool { return !e.Final })
	})
	require.Eventually(t, func() bool { return asked.Load() > 0 }, wait, 5*time.Millisecond, "NextURL was not asked")
	away := sent.Load()
	// more than the 50 a join replays, per room: only a resume after the
	// last id brings them all
	waitSent(away + 150)
	assert.Equal(t, "", crx.Node(), "still away")
	released := sent.Load()
	open()
	rrx.waitFor(t, "the reconnect", func(evs []client.Event) bool {
		return has(evs, func(e client.ConnectedEvent) bool { return e.Reconnect })
	})
	require.NoError(t, <-senderDone)
	close(rxStop)
	<-rxDone
	if fault == "sigterm" {
		exited, err := victim.Wait(wait)
		require.True(t, exited, "the drained node exits")
		require.NoError(t, err)
	}

	evs := rrx.events()
	var disc client.DisconnectedEvent
	for _, ev := range evs {
		if d, ok := ev.(client.DisconnectedEvent); ok {
			disc = d
			break
		}
	}
	assert.ErrorIs(t, disc.Err, want, "the first disconnect: %v", disc.Err)
	for _, room := range rooms {
		assert.True(t, has(evs, func(e client.JoinedEvent) bool { return e.Resumed && e.Room.ID == room }), "%s resumed", room)
	}
	assert.Contains(t, []string{"n2", "n3"}, crx.Node())
	rxMu.Lock()
	assert.Empty(t, rxErrs, "every say of the receiver was acked")
	mine := slices.Clone(rxIDs)
	rxMu.Unlock()
	require.NotEmpty(t, mine)

	// the receiver saw exactly each room's history: no gap, no duplicate
	for _, room := range rooms {
		hist, err := tx.History(ctx, room, client.HistoryOptions{Limit: 1000})
		require.NoError(t, err)
		require.Less(t, len(hist), 1000, "the whole history fits one page")
		evs := rrx.waitFor(t, "every message of "+room, func(evs []client.Event) bool {
			return len(messages(evs, room)) >= len(hist)
		})
		got := ids(messages(evs, room))
		require.Equal(t, ids(hist), got, "%s: the receiver's messages are the history, once each, in order", room)
		assert.True(t, slices.IsSorted(got))
		if room == rooms[0] {
			for _, id := range mine {
				assert.Contains(t, got, id, "an acked say of the receiver is in the history")
			}
			n := 0
			for _, m := range hist {
				if m.From == "rx" {
					n++
				}
			}
			// A say in flight when the node went is sent again with its
			// ref; until the server deduplicates refs it may be stored
			// twice, never lost.
			assert.GreaterOrEqual(t, n, len(mine))
			t.Logf("%s: %d messages, %d of the receiver for %d acked says; %d sent by the sender while away; %d duplicates dropped at the seam",
				room, len(hist), n, len(mine), released-away, crx.Stats().Duplicates)
		}
	}
	txCount := 0
	for _, room := range rooms {
		txCount += len(onlyFrom(messages(rrx.events(), room), "tx"))
	}
	assert.Equal(t, total, txCount, "every message of the sender, once")
}

func onlyFrom(ms []client.Message, from string) []client.Message {
	var out []client.Message
	for _, m := range ms {
		if m.From == from {
			out = append(out, m)
		}
	}
	return out
}

// A Conn that joined a room with no message yet and lost its node before
// any came has no last id to resume after: it used to resume without one,
// which is a join (the latest 50), and silently missed the rest of what
// was sent while it was away (issue #38). It resumes from the room's start
// instead and gets every message, once, in order.
func TestReconnectResumesARoomJoinedEmpty(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx := ctxT(t)
	_, err := adminOf(t, cl).SetSetting(ctx, "rate.messages_per_second", 1000)
	require.NoError(t, err)
	urls := cl.URLs()
	gate := make(chan struct{})
	var release sync.Once
	open := func() { release.Do(func() { close(gate) }) }
	rx := newClient(t, "rx", client.Config{NodeURLs: urls, Backoff: client.Backoff{Min: 50 * time.Millisecond, Max: time.Second}, NextURL: func(string) string {
		<-gate
		return urls[1]
	}})
	tx := newClient(t, "tx", client.Config{BaseURL: urls[1]})
	crx, rrx := connect(t, rx, client.ConnOptions{})
	ctx2, _ := connect(t, tx, client.ConnOptions{})
	require.Equal(t, "n1", crx.Node())
	t.Cleanup(open)
	room, err := crx.Join(ctx, "empty")
	require.NoError(t, err)
	_, err = ctx2.Join(ctx, "empty")
	require.NoError(t, err)
	require.Equal(t, "", crx.LastID(room.ID), "nothing received yet")
	require.Eventually(t, func() bool {
		s, err := tx.Settings(ctx)
		return err == nil && s.Values["rate.messages_per_second"] == float64(1000)
	}, wait, 20*time.Millisecond)

	cl.Nodes[0].Kill()
	rrx.waitFor(t, "the disconnect", func(evs []client.Event) bool {
		return has(evs, func(e client.DisconnectedEvent) bool { return !e.Final })
	})
	// more than the 50 a join replays, sent while the receiver is away
	const total = 150
	for i := range total {
		_, err := ctx2.Say(ctx, room.ID, fmt.Sprintf("tx %d", i))
		require.NoError(t, err)
	}
	open()
	evs := rrx.waitFor(t, "every message", func(evs []client.Event) bool { return len(messages(evs, room.ID)) >= total })
	hist, err := tx.History(ctx, room.ID, client.HistoryOptions{Limit: 1000})
	require.NoError(t, err)
	require.Len(t, hist, total)
	assert.Equal(t, ids(hist), ids(messages(evs, room.ID)), "every message once, in order")
	assert.False(t, has(evs, func(client.ResumeGapEvent) bool { return true }), "no gap to report")
}
