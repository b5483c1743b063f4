package rooms

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/names"
)

func TestJoin(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	var capacity atomic.Int64
	capacity.Store(3)
	s := nodes(t, r, 1, Config{Capacity: func() int { return int(capacity.Load()) }})[0]
	events := subscribe(t, r.NewClient(t), s.Messages.Channel("general-1"))

	t.Run("first join creates room 1", func(t *testing.T) {
		room, err := s.Seats.Join(ctx, "general", "alice", ws1)
		require.NoError(t, err)
		assert.Equal(t, Room{ID: "general-1", Lobby: "general", Seq: 1, Capacity: 3, Members: []string{"alice"}}, room)
		assert.Equal(t, Event{Type: EventPresence, Room: "general-1", User: "alice", State: StateJoined}, nextEvent(t, events))
	})

	t.Run("rejoin of a seated user answers the same room and publishes nothing", func(t *testing.T) {
		room, err := s.Seats.Join(ctx, "general", "alice", ws1)
		require.NoError(t, err)
		assert.Equal(t, "general-1", room.ID)
		room, err = s.Seats.Join(ctx, "general", "bob", ws1)
		require.NoError(t, err)
		assert.Equal(t, []string{"alice", "bob"}, room.Members)
		assert.Equal(t, "bob", nextEvent(t, events).User, "the next event is bob's, none for alice's rejoin")
	})

	t.Run("full room makes a new room", func(t *testing.T) {
		_, err := s.Seats.Join(ctx, "general", "carol", ws1)
		require.NoError(t, err)
		room, err := s.Seats.Join(ctx, "general", "dave", ws1)
		require.NoError(t, err)
		assert.Equal(t, Room{ID: "general-2", Lobby: "general", Seq: 2, Capacity: 3, Members: []string{"dave"}}, room)
		nextEvent(t, events) // carol
	})

	t.Run("leave frees the seat at once and the hole is refilled first", func(t *testing.T) {
		require.NoError(t, s.Seats.Leave(ctx, "general-1", "bob"))
		assert.Equal(t, Event{Type: EventPresence, Room: "general-1", User: "bob", State: StateLeft}, nextEvent(t, events))
		room, err := s.Seats.Join(ctx, "general", "erin", ws1)
		require.NoError(t, err)
		assert.Equal(t, "general-1", room.ID)
		assert.Equal(t, []string{"alice", "carol", "erin"}, room.Members)
		nextEvent(t, events) // erin
	})

	t.Run("leave of a user without a seat is not seated", func(t *testing.T) {
		assert.ErrorIs(t, s.Seats.Leave(ctx, "general-1", "bob"), ErrNotSeated)
		assert.ErrorIs(t, s.Seats.Leave(ctx, "general-2", "alice"), ErrNotSeated)
		assert.ErrorIs(t, s.Seats.Leave(ctx, "general-9", "alice"), ErrUnknownRoom)
	})

	t.Run("lowering capacity evicts nobody and later joins respect it", func(t *testing.T) {
		capacity.Store(1)
		room, err := s.Seats.Room(ctx, "general-1")
		require.NoError(t, err)
		assert.Equal(t, 1, room.Capacity)
		assert.Len(t, room.Members, 3)
		room, err = s.Seats.Join(ctx, "general", "frank", ws1)
		require.NoError(t, err)
		assert.Equal(t, "general-3", room.ID, "room 2 holds dave: full at capacity 1")
	})

	t.Run("raising capacity reopens full rooms lowest first", func(t *testing.T) {
		capacity.Store(4)
		room, err := s.Seats.Join(ctx, "general", "gina", ws1)
		require.NoError(t, err)
		assert.Equal(t, "general-1", room.ID)
		room, err = s.Seats.Join(ctx, "general", "hank", ws1)
		require.NoError(t, err)
		assert.Equal(t, "general-2", room.ID)
	})

	t.Run("rooms lists every room lowest first with live members", func(t *testing.T) {
		rooms, err := s.Seats.Rooms(ctx, "general")
		require.NoError(t, err)
		require.Len(t, rooms, 3)
		assert.Equal(t, []string{"alice", "carol", "erin", "gina"}, rooms[0].Members)
		assert.Equal(t, []string{"dave", "hank"}, rooms[1].Members)
		assert.Equal(t, []string{"frank"}, rooms[2].Members)
		none, err := s.Seats.Rooms(ctx, "empty")
		require.NoError(t, err)
		assert.Empty(t, none)
		n, _ := checkLobby(t, r, "general", 4)
		assert.Equal(t, 3, n)
	})

	t.Run("counters count rooms created", func(t *testing.T) {
		_, created, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 3, created)
	})

	t.Run("unknown room is unknown", func(t *testing.T) {
		_, err := s.Seats.Room(ctx, "general-4")
		assert.ErrorIs(t, err, ErrUnknownRoom)
		_, err = s.Seats.Room(ctx, "nowhere-1")
		assert.ErrorIs(t, err, ErrUnknownRoom)
	})

	t.Run("seated tells live seats", func(t *testing.T) {
		ok, err := s.Seats.Seated(ctx, "general-1", "alice")
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = s.Seats.Seated(ctx, "general-1", "bob")
		require.NoError(t, err)
		assert.False(t, ok)
	})
}

func TestBadNamesAreRefused(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	s := nodes(t, r, 1, Config{})[0]
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"lobby with a brace", func() error { _, err := s.Seats.Join(ctx, "a}{b", "alice", ws1); return err }()},
		{"empty user", func() error { _, err := s.Seats.Join(ctx, "general", "", ws1); return err }()},
		{"user with a dot", func() error { _, err := s.Seats.Join(ctx, "general", "a.b", ws1); return err }()},
		{"room without number", func() error { return s.Seats.Leave(ctx, "general", "alice") }()},
		{"room with zero", func() error { _, err := s.Seats.Room(ctx, "general-0"); return err }()},
		{"room of a bad lobby", func() error { _, err := s.say(ctx, "a*b-1", "alice", "hi"); return err }()},
		{"rooms of a bad lobby", func() error { _, err := s.Seats.Rooms(ctx, "a b"); return err }()},
	} {
		t.Run(tc.name+" is a bad name", func(t *testing.T) {
			assert.ErrorIs(t, tc.err, names.ErrBadName)
		})
	}
	assert.Empty(t, s.Messages.Channel("a}{b-1"))
}

func TestReclaim(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(2), Now: clock.Now, Lease: func() time.Duration { return 10 * time.Second }})[0]
	for _, u := range []string{"a", "b", "c"} {
		_, err := s.Seats.Join(ctx, "lobby", u, ws1)
		require.NoError(t, err)
	}

	t.Run("a live seat is kept", func(t *testing.T) {
		room, err := s.Seats.Reclaim(ctx, "lobby-1", "a", ws1)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, room.Members)
	})

	t.Run("a lost seat is taken back when one is free", func(t *testing.T) {
		clock.Add(5 * time.Second)
		_, err := s.Seats.Renew(ctx, []Attachment{{"lobby-1", "b", "ws1"}, {"lobby-2", "c", "ws1"}})
		require.NoError(t, err)
		clock.Add(6 * time.Second) // a's lease ran out
		room, err := s.Seats.Reclaim(ctx, "lobby-1", "a", ws1)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, room.Members)
	})

	t.Run("a full room is full", func(t *testing.T) {
		_, err := s.Seats.Reclaim(ctx, "lobby-1", "d", ws1)
		assert.ErrorIs(t, err, ErrRoomFull)
	})

	t.Run("a seat in another room of the lobby is elsewhere", func(t *testing.T) {
		_, err := s.Seats.Reclaim(ctx, "lobby-1", "c", ws1)
		assert.ErrorIs(t, err, ErrSeatedElsewhere)
	})

	t.Run("an unknown room is unknown", func(t *testing.T) {
		_, err := s.Seats.Reclaim(ctx, "lobby-7", "a", ws1)
		assert.ErrorIs(t, err, ErrUnknownRoom)
	})
	checkLobby(t, r, "lobby", 2)
}

func TestNewRefusesALockWithAnotherPrefix(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	_, err := New(r.Client, Config{Prefix: r.Prefix, Lock: lock.New(r.Client, lock.Config{Prefix: "other"})})
	assert.Error(t, err)
	_, err = New(r.Client, Config{Prefix: r.Prefix, Lock: lock.New(r.Client, lock.Config{Prefix: r.Prefix}), Registerer: prometheus.NewRegistry()})
	assert.NoError(t, err)
}

func TestRoomJSONIsTheProtocolShape(t *testing.T) {
	b, err := json.Marshal(Room{ID: "general-3", Lobby: "general", Seq: 3, Capacity: 50, Members: []string{"alice"}})
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"general-3","lobby":"general","seq":3,"capacity":50,"members":["alice"]}`, string(b))
}

func TestJoinWhileRedisIsDown(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	// a client that gives up at the context's deadline, as chatd's does
	rdb := redis.NewClient(&redis.Options{Addr: r.Addrs[0], ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	s, err := New(rdb, Config{Prefix: r.Prefix, Capacity: fixed(2)})
	require.NoError(t, err)
	_, err = s.Seats.Join(ctx, "general", "alice", ws1)
	require.NoError(t, err)

	t.Run("a join while the server is killed is a redis error", func(t *testing.T) {
		r.Server.Kill(t)
		_, err := s.Seats.Join(ctx, "general", "bob", ws1)
		require.Error(t, err)
		assert.False(t, errors.Is(err, ErrBusy) || errors.Is(err, ErrUnknownRoom))
		r.Server.Start(t)
	})

	t.Run("a join cut off by a hung server leaves no half-made room", func(t *testing.T) {
		require.Eventually(t, func() bool { _, err := s.Seats.Join(ctx, "general", "alice", ws1); return err == nil }, 10*time.Second, 50*time.Millisecond)
		_, err := s.Seats.Join(ctx, "general", "bob", ws1) // room 1 is full now
		require.NoError(t, err)
		r.Server.Pause(t)
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err = s.Seats.Join(cctx, "general", "carol", ws1) // needs a new room
		cancel()
		require.Error(t, err)
		r.Server.Resume(t)
		require.Eventually(t, func() bool { return r.Client.Ping(ctx).Err() == nil }, 10*time.Second, 20*time.Millisecond)
		rooms, seats := checkLobby(t, r, "general", 2)
		assert.Contains(t, [][2]int{{1, 2}, {2, 3}}, [2]int{rooms, seats}, "carol's join ran whole or not at all")
		room, err := s.Seats.Join(ctx, "general", "carol", ws1)
		require.NoError(t, err)
		assert.Equal(t, "general-2", room.ID)
	})
}

func TestMetricsAreRegistered(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	reg := prometheus.NewRegistry()
	ss := nodes(t, r, 2, Config{Registerer: reg, Capacity: fixed(1)})
	ctx := context.Background()
	_, err := ss[0].Seats.Join(ctx, "general", "a", ws1)
	require.NoError(t, err)
	_, err = ss[1].Seats.Join(ctx, "general", "a", ws1)
	require.NoError(t, err)
	assert.Equal(t, 1.0, testkit.Value(t, ss[0].Seats.m.created))
	assert.Equal(t, 1.0, testkit.Value(t, ss[1].Seats.m.rejoined), "nodes share the registry's collectors")
	fams, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range fams {
		got = append(got, f.GetName())
	}
	assert.Subset(t, got, []string{"chatd_rooms_joins_total", "chatd_rooms_join_seconds", "chatd_rooms_lock_hold_seconds", "chatd_lock_wait_seconds"})
}
