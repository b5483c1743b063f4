package rooms

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

func TestHistoriesLiveWhileTheirRoomIsUsed(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	const idle = time.Hour
	s := nodes(t, r, 1, Config{Capacity: fixed(1), IdleTTL: idle, Now: clock.Now,
		Lease: func() time.Duration { return 10 * time.Second }})[0]
	for _, u := range []string{"alice", "bob"} { // alice in room 1, bob in room 2
		_, err := s.Seats.Join(ctx, "h", u, ws1)
		require.NoError(t, err)
	}
	for _, room := range []string{"h-1", "h-2"} {
		_, err := s.say(ctx, room, map[string]string{"h-1": "alice", "h-2": "bob"}[room], "hi")
		require.NoError(t, err)
	}
	h1, h2 := historyKey(s.Seats.ks, "h", 1), historyKey(s.Seats.ks, "h", 2)
	ttl := func(k string) time.Duration { t.Helper(); return r.Client.PTTL(ctx, k).Val() }

	t.Run("a send gives its room's history the idle TTL", func(t *testing.T) {
		assert.Greater(t, ttl(h1), idle-time.Minute)
		assert.LessOrEqual(t, ttl(h1), idle)
	})

	t.Run("a renewal refreshes the histories of the rooms it renews, and only those", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, h1, time.Minute).Err())
		require.NoError(t, r.Client.PExpire(ctx, h2, time.Minute).Err())
		lost, err := s.Seats.Renew(ctx, attsOf("h-1", "alice"))
		require.NoError(t, err)
		require.Empty(t, lost)
		assert.Greater(t, ttl(h1), idle-time.Minute, "room 1's history")
		assert.LessOrEqual(t, ttl(h2), time.Minute, "room 2 was not renewed")
	})

	t.Run("a renewal that renews nothing in a room refreshes nothing", func(t *testing.T) {
		freed, err := s.Seats.Detach(ctx, "h-2", "bob", ws1.ID)
		require.NoError(t, err)
		require.True(t, freed)
		lost, err := s.Seats.Renew(ctx, attsOf("h-2", "bob"))
		require.NoError(t, err)
		assert.Len(t, lost, 1)
		assert.LessOrEqual(t, ttl(h2), time.Minute, "a lost attachment keeps no history alive")
	})

	t.Run("the seat scripts never touch a history", func(t *testing.T) {
		require.NoError(t, r.Client.PExpire(ctx, h1, time.Minute).Err())
		_, err := s.Seats.Join(ctx, "h", "carol", ws1) // room 3
		require.NoError(t, err)
		require.NoError(t, s.Seats.Leave(ctx, "h-1", "alice"))
		_, err = s.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.LessOrEqual(t, ttl(h1), time.Minute)
	})
}

func TestAnExpiredRESTAttachmentStopsMarkingItsRoom(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	const lease = 10 * time.Second
	s := nodes(t, r, 1, Config{Now: clock.Now, Lease: func() time.Duration { return lease }})[0]
	room, err := s.Seats.Join(ctx, "p", "alice", Attach{ID: "rest:1", REST: true})
	require.NoError(t, err)
	_, err = s.Seats.Join(ctx, "p", "alice", Attach{ID: "ws:1"})
	require.NoError(t, err)
	res, err := s.Messages.Send(ctx, room.ID, "alice", "hi", SendOptions{})
	require.NoError(t, err)
	require.True(t, res.HasREST)
	// Only the WebSocket is renewed: the REST session died without a detach.
	for range 2 {
		clock.Add(lease * 6 / 10)
		lost, err := s.Seats.Renew(ctx, []Attachment{{room.ID, "alice", "ws:1"}})
		require.NoError(t, err)
		require.Empty(t, lost)
	}
	res, err = s.Messages.Send(ctx, room.ID, "alice", "hi", SendOptions{})
	require.NoError(t, err)
	assert.False(t, res.HasREST, "the renewal dropped the expired REST attachment it did not list")
	assert.Equal(t, map[string][]string{"alice": {"ws:1"}}, attachments(t, r, "p"))
}

func TestSeatScriptsDuringASlotMigration(t *testing.T) {
	t.Parallel()
	r := redistest.OwnCluster(t, redistest.ClusterOptions{})
	ctx := context.Background()
	s := nodes(t, r, 1, Config{Capacity: fixed(3)})[0]
	const lobby = "moving"
	var atts []Attachment
	for i := range 9 {
		u := "u" + strconv.Itoa(i)
		room, err := s.Seats.Join(ctx, lobby, u, ws1)
		require.NoError(t, err)
		_, err = s.say(ctx, room.ID, u, "hi")
		require.NoError(t, err)
		atts = append(atts, Attachment{room.ID, u, ws1.ID})
	}
	from := r.NodeOf(t, roomsKey(s.Seats.ks, lobby))
	var to *redistest.Server
	for _, n := range r.Nodes {
		if n != from {
			to = n
			break
		}
	}
	src, dst := from.Client(t), to.Client(t)
	slot := int(src.ClusterKeySlot(ctx, roomsKey(s.Seats.ks, lobby)).Val())
	srcID := src.Do(ctx, "CLUSTER", "MYID").Val()
	dstID := dst.Do(ctx, "CLUSTER", "MYID").Val()
	require.NoError(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID).Err())
	require.NoError(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID).Err())
	// Half the lobby moves: room 2's history and the seats, not the rest.
	port := to.Addr[len("127.0.0.1:"):]
	for _, k := range []string{historyKey(s.Seats.ks, lobby, 2), membersKey(s.Seats.ks, lobby), leasesKey(s.Seats.ks, lobby)} {
		require.NoError(t, src.Do(ctx, "MIGRATE", "127.0.0.1", port, k, 0, 5000).Err())
	}

	t.Run("the naive script, which names a key it was not given, stops half way", func(t *testing.T) {
		// Its KEYS are all still on the source, so Redis runs it; the key
		// it builds has moved: the write before it stands.
		naive := redis.NewScript(`redis.call('INCR', KEYS[1])
return redis.call('ZCARD', (string.gsub(KEYS[1], ':seq$', ':members')))`)
		before := src.Get(ctx, seqKey(s.Seats.ks, lobby)).Val()
		err := naive.Run(ctx, src, []string{seqKey(s.Seats.ks, lobby)}).Err()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "non local key", "it ran until the key it built")
		assert.NotEqual(t, before, src.Get(ctx, seqKey(s.Seats.ks, lobby)).Val(), "the room counter moved, the rest did not")
		require.NoError(t, src.Set(ctx, seqKey(s.Seats.ks, lobby), before, 0).Err())
	})

	var joinErr, leaveErr error
	t.Run("while the lobby is split, every seat operation fails whole or runs whole", func(t *testing.T) {
		_, joinErr = s.Seats.Join(ctx, lobby, "late", ws1)
		_, renewErr := s.Seats.Renew(ctx, atts)
		leaveErr = s.Seats.Leave(ctx, "moving-1", "u0")
		_, detachErr := s.Seats.Detach(ctx, "moving-3", "u8", ws1.ID)
		_, sendErr := s.say(ctx, "moving-2", "u3", "during")
		t.Logf("join %v; renew %v; leave %v; detach %v; send %v", joinErr, renewErr, leaveErr, detachErr, sendErr)
		for _, err := range []error{joinErr, renewErr, leaveErr, detachErr, sendErr} {
			if err != nil {
				assert.Regexp(t, "TRYAGAIN|ASK|MOVED", err.Error(), "refused before running, never half way")
			}
		}
	})

	for {
		keys := src.ClusterGetKeysInSlot(ctx, slot, 100).Val()
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		require.NoError(t, src.Do(ctx, args...).Err())
	}
	require.NoError(t, dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())
	require.NoError(t, src.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", dstID).Err())

	t.Run("after the move the lobby is whole and works", func(t *testing.T) {
		rooms, seats := checkLobby(t, r, lobby, 3)
		if joinErr != nil && leaveErr != nil {
			assert.Equal(t, [2]int{3, 9}, [2]int{rooms, seats}, "the refused join and leave changed nothing")
		}
		attachments(t, r, lobby)
		_, err := s.Seats.Join(ctx, lobby, "after", ws1)
		require.NoError(t, err)
		_, err = s.Seats.Renew(ctx, atts)
		require.NoError(t, err)
		h, err := s.Messages.History(ctx, "moving-2", "", 10)
		require.NoError(t, err)
		assert.NotEmpty(t, h)
		checkLobby(t, r, lobby, 3)
		attachments(t, r, lobby)
	})
}

// TestPipelinesAfterAScriptFlush: every pipelined script path of the
// package runs on a server that lost its scripts (a restart, a promoted
// replica), re-sent by redisx.
func TestPipelinesAfterAScriptFlush(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]
	room, err := s.Seats.Join(ctx, "f", "alice", ws1)
	require.NoError(t, err)
	_, err = s.Seats.Join(ctx, "g", "alice", ws1)
	require.NoError(t, err)
	_, err = s.say(ctx, room.ID, "alice", "hi")
	require.NoError(t, err)
	flush := func() { t.Helper(); require.NoError(t, r.Client.ScriptFlush(ctx).Err()) }

	flush()
	lost, err := s.Seats.Renew(ctx, append(attsOf("f-1", "alice"), attsOf("g-1", "alice")...))
	require.NoError(t, err)
	assert.Empty(t, lost)
	flush()
	_, err = s.Seats.Sweep(ctx)
	require.NoError(t, err)
	flush()
	got, err := s.Seats.RoomMany(ctx, []string{"f-1", "g-1"})
	require.NoError(t, err)
	assert.Len(t, got, 2)
	flush()
	u, err := s.ReadMarks.Unread(ctx, "bob", []string{"f-1", "g-1"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"f-1": 1, "g-1": 0}, u)
	flush()
	out := s.Messages.SendMany(ctx, []SendRequest{{Room: "f-1", User: "alice", Text: "a", Key: "k1"}, {Room: "g-1", User: "alice", Text: "b"}}, SendOptions{})
	require.NoError(t, out[0].Err)
	require.NoError(t, out[1].Err)
	n, _, err := s.Messages.Counters(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 3, n)
	flush()
	s.Lobbies.indexCounts(ctx, lobbyCount{lobby: "f", online: 1, rooms: 1, stamp: 1 << 60, changed: true},
		lobbyCount{lobby: "g", online: 1, rooms: 1, stamp: 1 << 60, changed: true})
	assert.Zero(t, testkit.Value(t, s.Seats.m.counterErrors))
}
