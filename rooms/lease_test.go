package rooms

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// counter counts the commands and pipelines a client sends.
type counter struct {
	cmds, pipes atomic.Int64
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.cmds.Add(1)
		return next(ctx, cmd)
	}
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.pipes.Add(1)
		return next(ctx, cmds)
	}
}

func names10(prefix string) []string {
	out := make([]string, 10)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestNodeThatStopsRenewingLosesItsSeats(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	const lease = 2 * time.Second
	ss := nodes(t, r, 3, Config{Capacity: fixed(10), Now: clock.Now, Lease: func() time.Duration { return lease }})
	a, b, c := ss[0], ss[1], ss[2]
	for _, u := range names10("a") {
		room, err := a.Seats.Join(ctx, "arena", u, ws1)
		require.NoError(t, err)
		require.Equal(t, "arena-1", room.ID)
	}
	for _, u := range names10("b")[:5] {
		room, err := b.Seats.Join(ctx, "arena", u, ws1)
		require.NoError(t, err)
		require.Equal(t, "arena-2", room.ID)
	}
	events := subscribe(t, r.NewClient(t), a.Messages.Channel("arena-1"))

	// b renews its seats, a does not; then a's leases run out.
	clock.Add(1500 * time.Millisecond)
	lost, err := b.Seats.Renew(ctx, attsOf("arena-2", names10("b")[:5]...))
	require.NoError(t, err)
	require.Empty(t, lost)
	clock.Add(lease - 1500*time.Millisecond + time.Millisecond)

	t.Run("one sweep after the lease removes the silent node's members", func(t *testing.T) {
		n, err := c.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 10, n)
		room, err := c.Seats.Room(ctx, "arena-1")
		require.NoError(t, err)
		assert.Empty(t, room.Members)
		room, err = c.Seats.Room(ctx, "arena-2")
		require.NoError(t, err)
		assert.Len(t, room.Members, 5, "the renewing node keeps its seats")
		for range 10 {
			e := nextEvent(t, events)
			assert.Equal(t, StateLeft, e.State)
		}
	})

	t.Run("new joiners take the freed seats and no room is made", func(t *testing.T) {
		for _, u := range names10("n") {
			room, err := c.Seats.Join(ctx, "arena", u, ws1)
			require.NoError(t, err)
			assert.Equal(t, "arena-1", room.ID)
		}
		list, err := c.Seats.Rooms(ctx, "arena")
		require.NoError(t, err)
		assert.Len(t, list, 2)
		checkLobby(t, r, "arena", 10)
	})

	t.Run("the silent node learns its seats are lost", func(t *testing.T) {
		lost, err := a.Seats.Renew(ctx, attsOf("arena-1", names10("a")...))
		require.NoError(t, err)
		assert.Len(t, lost, 10)
	})

	t.Run("a second sweep finds nothing", func(t *testing.T) {
		n, err := c.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}

func TestJoinReapsExpiredSeatsWithoutASweep(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	ss := nodes(t, r, 2, Config{Capacity: fixed(3), Now: clock.Now, Lease: func() time.Duration { return 2 * time.Second }})
	for _, u := range []string{"x", "y", "z"} {
		_, err := ss[0].Seats.Join(ctx, "lobby", u, ws1)
		require.NoError(t, err)
	}
	events := subscribe(t, r.NewClient(t), ss[0].Messages.Channel("lobby-1"))
	clock.Add(2 * time.Second) // a lease expiring now is over

	room, err := ss[1].Seats.Join(ctx, "lobby", "w", ws1)
	require.NoError(t, err)
	assert.Equal(t, Room{ID: "lobby-1", Lobby: "lobby", Seq: 1, Capacity: 3, Members: []string{"w"}}, room)
	var states []string
	for range 4 {
		states = append(states, nextEvent(t, events).State)
	}
	assert.Equal(t, []string{StateLeft, StateLeft, StateLeft, StateJoined}, states)

	t.Run("an expired seat cannot send", func(t *testing.T) {
		_, err := ss[0].say(ctx, "lobby-1", "x", "hi")
		assert.ErrorIs(t, err, ErrNotSeated)
	})

	t.Run("a rejoin after the lease ran out is a new seat", func(t *testing.T) {
		room, err := ss[0].Seats.Join(ctx, "lobby", "x", ws1)
		require.NoError(t, err)
		assert.Equal(t, []string{"w", "x"}, room.Members)
	})
}

func TestRenew(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(50), Now: clock.Now, Lease: func() time.Duration { return 10 * time.Second }})[0]
	var seats []Attachment
	for _, lobby := range []string{"l1", "l2", "l3"} {
		for i := range 20 {
			u := fmt.Sprintf("u%d", i)
			room, err := s.Seats.Join(ctx, lobby, u, ws1)
			require.NoError(t, err)
			seats = append(seats, Attachment{Room: room.ID, User: u, ID: "ws1"})
		}
	}
	bogus := []Attachment{{"l1-1", "nobody", "ws1"}, {"l9-1", "u1", "ws1"}, {"not a room", "u1", "ws1"}, {"l2-1", "", "ws1"},
		{"l1-1", "u1", "ws2"}, {"l1-1", "u1", "bad id"}}
	_, err := s.Seats.Renew(ctx, seats[:1]) // loads the script
	require.NoError(t, err)
	cnt := &counter{}
	s.Seats.rdb.AddHook(cnt)

	t.Run("all seats of all lobbies renew in one pipelined round trip", func(t *testing.T) {
		clock.Add(9 * time.Second)
		lost, err := s.Seats.Renew(ctx, append(append([]Attachment{}, seats...), bogus...))
		require.NoError(t, err)
		assert.ElementsMatch(t, bogus, lost, "only the seats that never existed are lost")
		assert.EqualValues(t, 1, cnt.pipes.Load())
		assert.Zero(t, cnt.cmds.Load())
	})

	t.Run("renewed seats outlive their first lease", func(t *testing.T) {
		clock.Add(5 * time.Second) // 14s after joining, 5s after renewing
		n, err := s.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		ok, err := s.Seats.Seated(ctx, seats[0].Room, seats[0].User)
		require.NoError(t, err)
		assert.True(t, ok)
	})

	t.Run("a freed seat is lost", func(t *testing.T) {
		require.NoError(t, s.Seats.Leave(ctx, seats[0].Room, seats[0].User))
		lost, err := s.Seats.Renew(ctx, seats[:2])
		require.NoError(t, err)
		assert.Equal(t, seats[:1], lost)
	})

	t.Run("renewing nothing sends nothing", func(t *testing.T) {
		before := cnt.cmds.Load() + cnt.pipes.Load()
		lost, err := s.Seats.Renew(ctx, nil)
		require.NoError(t, err)
		assert.Empty(t, lost)
		assert.Equal(t, before, cnt.cmds.Load()+cnt.pipes.Load())
	})
}

func TestSweep(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(2), Now: clock.Now, Lease: func() time.Duration { return 3 * time.Second }})[0]
	for _, lobby := range []string{"s1", "s2", "s3"} {
		for _, u := range []string{"a", "b", "c", "d", "e"} {
			_, err := s.Seats.Join(ctx, lobby, u, ws1)
			require.NoError(t, err)
		}
	}
	_, err := s.Seats.Sweep(ctx)
	require.NoError(t, err)

	t.Run("a sweep with nothing due is one command", func(t *testing.T) {
		cnt := &counter{}
		s.Seats.rdb.AddHook(cnt)
		n, err := s.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, n)
		assert.EqualValues(t, 1, cnt.cmds.Load()+cnt.pipes.Load())
	})

	t.Run("a sweep after the lease reaps every lobby", func(t *testing.T) {
		clock.Add(3 * time.Second)
		n, err := s.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 15, n)
		for _, lobby := range []string{"s1", "s2", "s3"} {
			rooms, seats := checkLobby(t, r, lobby, 2)
			assert.Equal(t, 3, rooms)
			assert.Zero(t, seats)
		}
	})

	t.Run("the sweeper loop reaps by itself", func(t *testing.T) {
		_, err := s.Seats.Join(ctx, "s1", "late", ws1)
		require.NoError(t, err)
		clock.Add(4 * time.Second)
		sctx, cancel := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- s.Seats.RunSweeper(sctx, 5*time.Millisecond) }()
		require.Eventually(t, func() bool {
			ok, err := s.Seats.Seated(ctx, "s1-1", "late")
			return err == nil && !ok && r.Client.ZCount(ctx, membersKey(s.Seats.ks, "s1"), "1", "1").Val() == 0
		}, 5*time.Second, 10*time.Millisecond)
		cancel()
		assert.NoError(t, <-done)
	})
}

func TestRenewOfARoomWithMoreSeatsThanLuaUnpacks(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{Capacity: fixed(3000)})[0]
	var seats []Attachment
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 2500 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := fmt.Sprintf("u%d", i)
			room, err := s.Seats.Join(ctx, "big", u, ws1)
			assert.NoError(t, err)
			mu.Lock()
			seats = append(seats, Attachment{room.ID, u, "ws1"})
			mu.Unlock()
		}()
	}
	wg.Wait()
	lost, err := s.Seats.Renew(ctx, append(seats, Attachment{"big-1", "ghost", "ws1"}))
	require.NoError(t, err)
	assert.Equal(t, []Attachment{{"big-1", "ghost", "ws1"}}, lost)
}

// TestRenewRefreshesHistoryTTLsRarely: a room's history lives IdleTTL after
// its last renewal, so Renew refreshes its TTL once per IdleTTL/48, not on
// every tick.
func TestRenewRefreshesHistoryTTLsRarely(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(50), Now: clock.Now, IdleTTL: 48 * time.Hour,
		Lease: func() time.Duration { return 30 * time.Second }})[0]
	room, err := s.Seats.Join(ctx, "hist", "ann", ws1)
	require.NoError(t, err)
	_, err = s.say(ctx, room.ID, "ann", "hello")
	require.NoError(t, err)
	lobby, seq, err := ParseRoom(room.ID)
	require.NoError(t, err)
	hist := historyKey(s.Seats.ks, lobby, seq)
	atts := []Attachment{{Room: room.ID, User: "ann", ID: "ws1"}}
	ttl := func() time.Duration {
		d, err := r.Client.PTTL(ctx, hist).Result()
		require.NoError(t, err)
		return d
	}
	_, err = s.Seats.Renew(ctx, atts)
	require.NoError(t, err)
	assert.Greater(t, ttl(), 47*time.Hour, "the first Renew refreshes it")

	require.NoError(t, r.Client.PExpire(ctx, hist, time.Hour).Err())
	clock.Add(10 * time.Second)
	_, err = s.Seats.Renew(ctx, atts)
	require.NoError(t, err)
	assert.LessOrEqual(t, ttl(), time.Hour, "not again within IdleTTL/48")

	for range 358 { // renewing every 10 s, to 10 s short of the hour
		clock.Add(10 * time.Second)
		lost, err := s.Seats.Renew(ctx, atts)
		require.NoError(t, err)
		require.Empty(t, lost)
	}
	assert.LessOrEqual(t, ttl(), time.Hour, "not within the hour")
	clock.Add(10 * time.Second)
	_, err = s.Seats.Renew(ctx, atts)
	require.NoError(t, err)
	assert.Greater(t, ttl(), 47*time.Hour, "again once IdleTTL/48 passed")
}
