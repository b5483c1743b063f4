package rooms

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

// storm joins users concurrently spread over the nodes and checks the
// outcome: the least rooms that fit them, none over capacity, each user in
// exactly one seat, in the room Join answered.
func storm(t *testing.T, r *redistest.Redis, users, capacity, batch int) {
	t.Helper()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	ss := nodes(t, r, 3, Config{Capacity: fixed(capacity), Registerer: reg})
	for _, s := range ss {
		s.Seats.joins.maxBatch = batch
	}
	lobby := "storm"
	got := make([]Room, users)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			room, err := ss[i%3].Seats.Join(ctx, lobby, fmt.Sprintf("u%d", i), ws1)
			assert.NoError(t, err)
			got[i] = room
		}()
	}
	close(start)
	wg.Wait()

	want := (users + capacity - 1) / capacity
	rooms, seats := checkLobby(t, r, lobby, capacity)
	assert.Equal(t, want, rooms, "exactly the rooms needed")
	assert.Equal(t, users, seats, "every user holds a seat")
	for i, room := range got {
		assert.Contains(t, room.Members, fmt.Sprintf("u%d", i), "u%d's answer lists them", i)
	}
	list, err := ss[0].Seats.Rooms(ctx, lobby)
	require.NoError(t, err)
	require.Len(t, list, want)
	for _, room := range list[:want-1] {
		assert.Len(t, room.Members, capacity, "%s is full", room.ID)
	}
	assert.Equal(t, float64(want), testkit.Value(t, ss[0].Seats.m.created), "one creation per room")
	assert.Equal(t, float64(users), testkit.Value(t, ss[0].Seats.m.created)+testkit.Value(t, ss[0].Seats.m.seated))
}

func TestJoinStorm(t *testing.T) {
	t.Parallel()
	t.Run("1000 joins over 3 nodes at capacity 50 make exactly 20 rooms", func(t *testing.T) {
		t.Parallel()
		storm(t, redistest.Real(t), 1000, 50, maxBatch)
	})
	t.Run("1000 joins over 3 nodes at capacity 7 make exactly 143 rooms", func(t *testing.T) {
		t.Parallel()
		storm(t, redistest.Real(t), 1000, 7, maxBatch)
	})
	t.Run("1000 single joins over 3 nodes at capacity 7 make exactly 143 rooms", func(t *testing.T) {
		t.Parallel()
		storm(t, redistest.Real(t), 1000, 7, 1) // no group commit: every join contends alone
	})
	t.Run("300 joins on a cluster at capacity 7 make exactly 43 rooms", func(t *testing.T) {
		t.Parallel()
		storm(t, redistest.Cluster(t), 300, 7, maxBatch)
	})
	t.Run("200 joins on the shared test server make exactly 8 rooms", func(t *testing.T) {
		t.Parallel()
		storm(t, redistest.New(t), 200, 25, maxBatch) // a private redis-server; embedded only without one (never in CI)
	})
	t.Run("200 joins on the embedded server make exactly 8 rooms", func(t *testing.T) {
		t.Parallel()
		storm(t, embeddedRedis(t), 200, 25, maxBatch) // what `chatd` runs on without --redis
	})
}

func TestInterleavedJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const capacity, pool, ops = 10, 45, 3000
	ss := nodes(t, r, 3, Config{Capacity: fixed(capacity)})
	lobby := "churn"

	// Workers join and leave users of a pool of 45, so at most 45 are seated
	// and 5 rooms always suffice; a checker reads the rooms meanwhile.
	var busy [pool]sync.Mutex
	var done atomic.Bool
	var maxRooms atomic.Int64
	var wg sync.WaitGroup
	checker := make(chan struct{})
	go func() {
		defer close(checker)
		for !done.Load() {
			list, err := ss[0].Seats.Rooms(ctx, lobby)
			if !assert.NoError(t, err) {
				return
			}
			for _, room := range list {
				assert.LessOrEqual(t, len(room.Members), capacity, "%s within capacity", room.ID)
			}
			maxRooms.Store(max(maxRooms.Load(), int64(len(list))))
		}
	}()
	var next atomic.Int64
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[w%3]
			for next.Add(1) <= ops {
				i := rand.IntN(pool)
				user := fmt.Sprintf("u%d", i)
				busy[i].Lock()
				room, err := s.Seats.Join(ctx, lobby, user, ws1)
				if assert.NoError(t, err) && rand.IntN(2) == 0 {
					assert.NoError(t, s.Seats.Leave(ctx, room.ID, user))
				}
				busy[i].Unlock()
			}
		}()
	}
	wg.Wait()
	done.Store(true)
	<-checker

	rooms, _ := checkLobby(t, r, lobby, capacity)
	assert.LessOrEqual(t, rooms, (pool+capacity-1)/capacity, "holes were refilled before any new room was made")

	t.Run("a new joiner takes the lowest hole", func(t *testing.T) {
		list, err := ss[0].Seats.Rooms(ctx, lobby)
		require.NoError(t, err)
		for _, room := range list { // fill every hole
			for range capacity - len(room.Members) {
				_, err := ss[1].Seats.Join(ctx, lobby, fmt.Sprintf("fill%d", next.Add(1)), ws1)
				require.NoError(t, err)
			}
		}
		list, err = ss[0].Seats.Rooms(ctx, lobby)
		require.NoError(t, err)
		require.NotEmpty(t, list)
		last := list[len(list)-1]
		require.NoError(t, ss[2].Seats.Leave(ctx, last.ID, last.Members[0]))
		mid := list[len(list)/2]
		require.NoError(t, ss[2].Seats.Leave(ctx, mid.ID, mid.Members[0]))
		room, err := ss[0].Seats.Join(ctx, lobby, "late", ws1)
		require.NoError(t, err)
		assert.Equal(t, mid.ID, room.ID)
	})
}

func TestConcurrentJoinsOfOneUserTakeOneSeat(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	ss := nodes(t, r, 3, Config{Capacity: fixed(1)})
	_, err := ss[0].Seats.Join(ctx, "tabs", "first", ws1) // room 1 is full: the joins race to create room 2
	require.NoError(t, err)
	events := subscribe(t, r.NewClient(t), ss[0].Messages.Channel("tabs-2"))
	got := make(chan string, 30)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			room, err := ss[i%3].Seats.Join(ctx, "tabs", "alice", ws1)
			assert.NoError(t, err)
			got <- room.ID
		}()
	}
	wg.Wait()
	close(got)
	for id := range got {
		assert.Equal(t, "tabs-2", id)
	}
	rooms, seats := checkLobby(t, r, "tabs", 1)
	assert.Equal(t, 2, rooms)
	assert.Equal(t, 2, seats)
	// Every join's script ran before this PUBLISH, and a subscriber gets a
	// channel's messages in the server's order: all events precede the marker.
	require.NoError(t, r.Client.Publish(ctx, ss[0].Messages.Channel("tabs-2"), "marker").Err())
	var payloads []string
	for m := range events {
		if m.Payload == "marker" {
			break
		}
		payloads = append(payloads, m.Payload)
	}
	want, err := json.Marshal(Event{Type: EventPresence, Room: "tabs-2", User: "alice", State: StateJoined})
	require.NoError(t, err)
	assert.Equal(t, []string{string(want)}, payloads, "one joined event, as json.Marshal writes it")
}
