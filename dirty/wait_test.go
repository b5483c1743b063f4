package dirty

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestStormLosesNoMark marks sessions from three nodes while three nodes
// Take and long-poll them. Each session has one mark outstanding at a time
// and its marker waits for some poll to see it, so a lost mark stalls it
// and fails the test; a mark seen twice or a bit never marked fails it too.
func TestStormLosesNoMark(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := nodes(t, r, 3, Config{})
	const sessions, marksEach = 24, 30

	seen := make([]chan Mask, sessions)
	name := func(i int) string { return fmt.Sprintf("storm-%d", i) }
	for i := range seen {
		seen[i] = make(chan Mask, marksEach)
		_, err := n[i%3].Open(ctx, name(i), fmt.Sprintf("u%d", i))
		require.NoError(t, err)
		_, err = n[i%3].Take(ctx, name(i))
		require.NoError(t, err)
	}
	report := func(i int, m Mask) {
		if m != 0 {
			seen[i] <- m
		}
	}

	var pollers sync.WaitGroup
	var takes, waits atomic.Int64
	for k := range n {
		pollers.Add(1)
		go func() { // a plain poller on each node, over every session
			defer pollers.Done()
			for ctx.Err() == nil {
				for i := 0; i < sessions && ctx.Err() == nil; i++ {
					m, err := n[k].Take(ctx, name(i))
					if err == nil {
						takes.Add(1)
						report(i, m)
					}
				}
			}
		}()
	}
	for i := 0; i < sessions; i++ {
		pollers.Add(1)
		go func() { // a long poller per session
			defer pollers.Done()
			for ctx.Err() == nil {
				m, err := n[(i+1)%3].Wait(ctx, name(i), time.Second)
				if err == nil {
					waits.Add(1)
					report(i, m)
				}
			}
		}()
	}

	var markers sync.WaitGroup
	errs := make(chan error, sessions)
	for i := 0; i < sessions; i++ {
		markers.Add(1)
		go func() {
			defer markers.Done()
			for j := 0; j < marksEach; j++ {
				bit := Of(Section(j % int(numSections)))
				if err := n[(i+j)%3].MarkSessions(ctx, []string{name(i)}, bit); err != nil {
					errs <- err
					return
				}
				select {
				case m := <-seen[i]:
					if m != bit {
						errs <- fmt.Errorf("%s mark %d: a poll saw %s, want %s", name(i), j, m, bit)
						return
					}
				case <-time.After(10 * time.Second):
					errs <- fmt.Errorf("%s mark %d (%s): no poll saw it: lost", name(i), j, bit)
					return
				}
			}
		}()
	}
	markers.Wait()
	cancel()
	pollers.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	for i := range seen {
		assert.Empty(t, seen[i], "%s: a mark was seen twice", name(i))
		m, err := n[0].Take(context.Background(), name(i))
		require.NoError(t, err)
		assert.Equal(t, Mask(0), m, "%s: nothing left over", name(i))
	}
	t.Logf("%d marks, %d takes, %d long polls returned", sessions*marksEach, takes.Load(), waits.Load())
}

// TestResubscribeWakesWaiters loses a wake-up on purpose (the bit is set
// behind the mark script's back, so nothing is published) and kills the
// pub/sub connections: the reconnect must wake the waiting poll, which
// takes the bit.
func TestResubscribeWakesWaiters(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	n := nodes(t, r, 2, Config{})
	_, err := n[0].Open(ctx, "lost", "frank")
	require.NoError(t, err)
	_, err = n[0].Take(ctx, "lost")
	require.NoError(t, err)

	t.Run("a wake lost in a reconnect is made up by Resubscribed", func(t *testing.T) {
		res := goWait(ctx, n[0].Tracker, "lost", 25*time.Second)
		registered(t, r, n[0].k, "lost")
		require.NoError(t, r.Client.SetBit(ctx, n[0].k.mask("lost"), int64(Wallet), 1).Err())
		require.NoError(t, r.Client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
		got := within(t, res, 10*time.Second, "the resubscribe wake-up")
		require.NoError(t, got.err)
		assert.Equal(t, Of(Wallet), got.m)
	})

	t.Run("a mark made while the connection is down is not lost", func(t *testing.T) {
		res := goWait(ctx, n[0].Tracker, "lost", 25*time.Second)
		registered(t, r, n[0].k, "lost")
		require.NoError(t, r.Client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err())
		require.NoError(t, n[1].MarkSessions(ctx, []string{"lost"}, Of(Notices)))
		got := within(t, res, 10*time.Second, "the wake-up")
		require.NoError(t, got.err)
		assert.Equal(t, Of(Notices), got.m)
	})

	t.Run("long polls wake again once the bus is back", func(t *testing.T) {
		require.Eventually(t, n[0].bus.Ready, 10*time.Second, 20*time.Millisecond)
		res := goWait(ctx, n[0].Tracker, "lost", 25*time.Second)
		registered(t, r, n[0].k, "lost")
		require.NoError(t, n[1].MarkUsers(ctx, []string{"frank"}, Of(Rooms)))
		got := within(t, res, 2*time.Second, "the wake-up")
		require.NoError(t, got.err)
		assert.Equal(t, Of(Rooms), got.m)
	})
}

func TestStopReleasesWaiters(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	n := nodes(t, r, 1, Config{})
	_, err := n[0].Open(ctx, "s", "gina")
	require.NoError(t, err)
	_, err = n[0].Take(ctx, "s")
	require.NoError(t, err)
	res := goWait(ctx, n[0].Tracker, "s", 25*time.Second)
	registered(t, r, n[0].k, "s")
	require.NoError(t, n[0].Stop(ctx))
	got := within(t, res, 5*time.Second, "stop releases the poll")
	require.NoError(t, got.err)
	assert.Equal(t, Mask(0), got.m)
	_, err = n[0].Wait(ctx, "s", time.Second)
	assert.ErrorIs(t, err, ErrNotStarted)
}

func TestWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	n := nodes(t, r, 1, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	res := goWait(ctx, n[0].Tracker, "s", 25*time.Second)
	registered(t, r, n[0].k, "s")
	cancel()
	got := within(t, res, 5*time.Second, "cancel ends the poll")
	assert.ErrorIs(t, got.err, context.Canceled)
}

func TestWaitIsCutAtMaxWait(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	n := nodes(t, r, 1, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	res := goWait(ctx, n[0].Tracker, "s", time.Hour)
	registered(t, r, n[0].k, "s")
	ttl, err := r.Client.PTTL(context.Background(), n[0].k.waiters("s")).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl, MaxWait+waitMargin, "an hour is cut to MaxWait")
	assert.Greater(t, ttl, MaxWait/2)
	cancel()
	within(t, res, 5*time.Second, "cancel ends the poll")
}
