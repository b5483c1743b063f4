package rooms

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/lock"
)

func TestLockHolderPausedPastItsTTLCannotCreateARoom(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	ss := nodes(t, r, 2, Config{Capacity: fixed(2), LockTTL: 300 * time.Millisecond})
	a, b := ss[0], ss[1]
	for _, u := range []string{"u1", "u2"} {
		_, err := a.Seats.Join(ctx, "duel", u, ws1)
		require.NoError(t, err)
	}

	// a takes the lobby's lock to create room 2 for u3, then stalls (a GC
	// pause, SIGSTOP) past the lock's TTL.
	holding, proceed := make(chan int64), make(chan struct{})
	var once sync.Once
	a.Seats.beforeCreate = func(_ context.Context, l *lock.Lock) {
		once.Do(func() {
			holding <- l.Fence()
			<-proceed
		})
	}
	got := make(chan Room)
	go func() {
		room, err := a.Seats.Join(ctx, "duel", "u3", ws1)
		assert.NoError(t, err)
		got <- room
	}()
	staleFence := <-holding

	// Meanwhile b finds every room full, waits out a's lock and creates room 2.
	room, err := b.Seats.Join(ctx, "duel", "u4", ws1)
	require.NoError(t, err)
	require.Equal(t, "duel-2", room.ID)
	_, fenceKey := a.Seats.lock.Keys(lockName("duel"))
	newFence, err := r.Client.Get(ctx, fenceKey).Int64()
	require.NoError(t, err)
	require.Greater(t, newFence, staleFence, "b's acquisition issued a newer fence")

	close(proceed)
	room = <-got

	t.Run("the stale holder's creation is refused by the fence", func(t *testing.T) {
		assert.Equal(t, 1.0, testkit.Value(t, a.Seats.m.fenceRejected))
		assert.Equal(t, 2.0, testkit.Value(t, a.Seats.m.created), "two creations in all (the nodes share a registry): room 1, and b's room 2")
	})

	t.Run("the stale holder's user takes the free seat in b's room", func(t *testing.T) {
		assert.Equal(t, "duel-2", room.ID)
		assert.Equal(t, []string{"u3", "u4"}, room.Members)
		rooms, seats := checkLobby(t, r, "duel", 2)
		assert.Equal(t, 2, rooms, "no duplicate room")
		assert.Equal(t, 4, seats)
	})

	t.Run("the room record carries its creator's fence", func(t *testing.T) {
		raw, err := r.Client.HGet(ctx, recordsKey(a.Seats.ks, "duel"), "2").Result()
		require.NoError(t, err)
		var rec struct {
			ID    string `json:"id"`
			Seq   int    `json:"seq"`
			Fence int64  `json:"fence"`
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &rec), raw)
		assert.Equal(t, "duel-2", rec.ID)
		assert.Equal(t, 2, rec.Seq)
		fence := rec.Fence
		assert.Equal(t, newFence, fence)
	})
}
