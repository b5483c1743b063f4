package rooms

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// servers are the Redis servers the lobby index and unread counts are
// tested on: a real redis-server, a 3-master Cluster (lobbies and the index
// on different masters), and the embedded server chatd runs on by default.
var servers = []struct {
	name string
	get  func(t *testing.T) *redistest.Redis
}{
	{"redis-server", func(t *testing.T) *redistest.Redis { return redistest.Real(t) }},
	{"cluster", func(t *testing.T) *redistest.Redis { return redistest.Cluster(t) }},
	{"embedded", embeddedRedis},
}

func TestLobbies(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			testLobbies(t, srv.get(t))
		})
	}
}

func testLobbies(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	clock := newClock()
	ss := nodes(t, r, 2, Config{Capacity: fixed(2), Now: clock.Now, Lease: func() time.Duration { return 10 * time.Second }})
	join := func(s *Service, lobby string, users ...string) {
		t.Helper()
		for _, u := range users {
			_, err := s.Seats.Join(ctx, lobby, u, ws1)
			require.NoError(t, err)
		}
	}
	list := func(limit int) []LobbyInfo {
		t.Helper()
		l, err := ss[1].Lobbies.List(ctx, limit)
		require.NoError(t, err)
		return l
	}

	l, err := ss[0].Lobbies.List(ctx, 0)
	require.NoError(t, err)
	assert.Empty(t, l, "no lobby yet")

	join(ss[0], "beta", "u1")
	join(ss[1], "alpha", "u1", "u2", "u3")
	join(ss[0], "gamma", "u1", "u2")
	join(ss[1], "gamma", "u3")
	join(ss[0], "alpha", "u1") // already seated: no change

	t.Run("most online first, ties by name, with the rooms", func(t *testing.T) {
		assert.Equal(t, []LobbyInfo{{"alpha", 3, 2}, {"gamma", 3, 2}, {"beta", 1, 1}}, list(0))
		assert.Equal(t, []LobbyInfo{{"alpha", 3, 2}}, list(1))
		assert.Len(t, list(100000), 3, "a limit over the maximum is the maximum")
	})

	t.Run("leaves and detaches count down; a lobby with nobody seated leaves the list", func(t *testing.T) {
		require.NoError(t, ss[0].Seats.Leave(ctx, "alpha-1", "u1"))
		freed, err := ss[1].Seats.Detach(ctx, "beta-1", "u1", ws1.ID)
		require.NoError(t, err)
		require.True(t, freed)
		assert.Equal(t, []LobbyInfo{{"gamma", 3, 2}, {"alpha", 2, 2}}, list(0))
	})

	t.Run("seats reaped by the sweeper count down", func(t *testing.T) {
		clock.Add(5 * time.Second)
		_, err := ss[1].Seats.Renew(ctx, attsOf("gamma-1", "u1", "u2"))
		require.NoError(t, err)
		clock.Add(6 * time.Second) // gamma-2's u3 and alpha's seats are 11s old
		n, err := ss[0].Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 3, n)
		assert.Equal(t, []LobbyInfo{{"gamma", 2, 2}}, list(0))
	})

	ks := keyspace.New(r.Prefix)
	t.Run("a lost index write is repaired by the next renewals", func(t *testing.T) {
		require.NoError(t, r.Client.ZRem(ctx, onlineKey(ks), "gamma").Err())
		require.NoError(t, r.Client.HDel(ctx, onlineInfoKey(ks), "gamma").Err())
		assert.Empty(t, list(0))
		_, err := ss[1].Seats.Renew(ctx, attsOf("gamma-1", "u1", "u2")) // holds the count
		require.NoError(t, err)
		_, err = ss[1].Seats.Renew(ctx, attsOf("gamma-1", "u1", "u2")) // sends it along
		require.NoError(t, err)
		assert.Equal(t, []LobbyInfo{{"gamma", 2, 2}}, list(0))
	})

	t.Run("a count older than the one indexed is refused", func(t *testing.T) {
		info, err := r.Client.HGet(ctx, onlineInfoKey(ks), "gamma").Result()
		require.NoError(t, err)
		var stamp int64
		_, err = fmt.Sscanf(info, "%d", &stamp)
		require.NoError(t, err)
		ss[0].Lobbies.indexCounts(ctx, lobbyCount{lobby: "gamma", online: 40, rooms: 9, stamp: stamp - 1, changed: true})
		assert.Equal(t, []LobbyInfo{{"gamma", 2, 2}}, list(0))
		ss[0].Lobbies.indexCounts(ctx, lobbyCount{lobby: "gamma", online: 2, rooms: 2, stamp: stamp, changed: true})
		assert.Equal(t, []LobbyInfo{{"gamma", 2, 2}}, list(0), "the same count again changes nothing")
	})

	t.Run("a count taken before the last seat left cannot bring the lobby back", func(t *testing.T) {
		info, err := r.Client.HGet(ctx, onlineInfoKey(ks), "gamma").Result()
		require.NoError(t, err)
		var before int64
		_, err = fmt.Sscanf(info, "%d", &before)
		require.NoError(t, err)
		require.NoError(t, ss[0].Seats.Leave(ctx, "gamma-1", "u1"))
		require.NoError(t, ss[1].Seats.Leave(ctx, "gamma-1", "u2"))
		assert.Empty(t, list(0))
		gone, err := r.Client.ZScore(ctx, onlineGoneKey(ks), "gamma").Result()
		require.NoError(t, err)
		assert.Greater(t, int64(gone), before, "the tombstone's stamp is newer")
		ss[0].Lobbies.indexCounts(ctx, lobbyCount{lobby: "gamma", online: 2, rooms: 2, stamp: before, changed: true})
		assert.Empty(t, list(0), "the late count is refused")
	})

	t.Run("a lobby rejoined after its keys expired is indexed again", func(t *testing.T) {
		keys, err := r.Client.Keys(ctx, r.Prefix+":{lobby:gamma}:*").Result()
		if r.Kind == redistest.Clusters {
			keys = append([]string(nil), ss[0].Seats.lobbyKeys("gamma")...) // KEYS reaches one master only: delete the known ones
			keys = append(keys, historyKey(ks, "gamma", 1), historyKey(ks, "gamma", 2))
		}
		require.NoError(t, err)
		for _, k := range keys {
			require.NoError(t, r.Client.Del(ctx, k).Err()) // as the idle expiry would
		}
		join(ss[0], "gamma", "u9")
		assert.Equal(t, []LobbyInfo{{"gamma", 1, 1}}, list(0))
	})
}

func TestLobbyIndexKeysShareASlot(t *testing.T) {
	ks := keyspace.New("p")
	want := keyspace.Slot(onlineKey(ks))
	assert.Equal(t, want, keyspace.Slot(onlineInfoKey(ks)))
	assert.Equal(t, want, keyspace.Slot(onlineGoneKey(ks)))
	assert.Equal(t, keyspace.Slot(membersKey(ks, "g")), keyspace.Slot(verKey(ks, "g")))
	assert.Equal(t, keyspace.Slot(membersKey(ks, "g")), keyspace.Slot(readKey(ks, "g", "alice")))
}

func TestLobbiesStorm(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	ss := nodes(t, r, 3, Config{Capacity: fixed(7)})
	const users = 60
	errs := make(chan error, users)
	for i := range users {
		go func() {
			s := ss[i%len(ss)]
			u := "u" + strconv.Itoa(i)
			room, err := s.Seats.Join(ctx, "storm", u, ws1)
			if err == nil && i%3 == 0 {
				err = s.Seats.Leave(ctx, room.ID, u)
			}
			errs <- err
		}()
	}
	for range users {
		require.NoError(t, <-errs)
	}
	rooms, seats := checkLobby(t, r, "storm", 7)
	l, err := ss[0].Lobbies.List(ctx, 10)
	require.NoError(t, err)
	assert.Equal(t, []LobbyInfo{{"storm", seats, rooms}}, l,
		"whatever order the writes reached the index in, the last count wins")
	assert.Equal(t, users-users/3, seats)
}
