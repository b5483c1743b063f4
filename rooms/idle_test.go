package rooms

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/redisx"
)

// lobbyKeys lists the keys under the test's prefix that belong to a lobby
// (everything but the global counters and index).
func scanLobbyKeys(t *testing.T, r *redistest.Redis) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	iter := r.Client.Scan(ctx, 0, r.Prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if strings.Contains(iter.Val(), "{lobby:") {
			out = append(out, iter.Val())
		}
	}
	require.NoError(t, iter.Err())
	return out
}

func TestIdleLobbiesAreForgotten(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	const idle = 2 * time.Second
	s := nodes(t, r, 1, Config{IdleTTL: idle})[0]

	for i := range 200 {
		lobby := fmt.Sprintf("l%d", i)
		room, err := s.Seats.Join(ctx, lobby, "alice", ws1)
		require.NoError(t, err)
		_, err = s.say(ctx, room.ID, "alice", "hi")
		require.NoError(t, err)
		if i%2 == 0 {
			require.NoError(t, s.Seats.Leave(ctx, room.ID, "alice"))
		} else {
			freed, err := s.Seats.Detach(ctx, room.ID, "alice", ws1.ID)
			require.NoError(t, err)
			require.True(t, freed)
		}
	}

	t.Run("left lobbies are out of the sweeper's index at once", func(t *testing.T) {
		assert.Zero(t, r.Client.ZCard(ctx, lobbiesKey(s.Seats.ks)).Val())
		cnt := &counter{}
		s.Seats.rdb.AddHook(cnt)
		_, err := s.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 1, cnt.cmds.Load()+cnt.pipes.Load(), "the sweep visits no lobby")
	})

	// A lobby left just now, for the subtests below that must run before
	// its keys expire, however loaded the machine.
	room, err := s.Seats.Join(ctx, "back", "alice", ws1)
	require.NoError(t, err)
	_, err = s.say(ctx, room.ID, "alice", "hi")
	require.NoError(t, err)
	require.NoError(t, s.Seats.Leave(ctx, room.ID, "alice"))

	t.Run("every key of an idle lobby has the idle TTL, one and the same; histories expire no later", func(t *testing.T) {
		keys := scanLobbyKeys(t, r)
		require.NotEmpty(t, keys)
		lobbyAt := r.Client.PExpireTime(ctx, seqKey(s.Seats.ks, "back")).Val()
		require.Greater(t, lobbyAt, time.Duration(0))
		histories := 0
		for _, k := range keys {
			at := r.Client.PExpireTime(ctx, k).Val()
			assert.True(t, at > 0 || at == -2, "%s has an expiry (or just expired): %v", k, at)
			// a say bucket, a say's record and a leave's record expire on
			// their own clocks
			if !strings.Contains(k, "{lobby:back}") || strings.Contains(k, ":sayrate:") || strings.Contains(k, ":said:") ||
				strings.Contains(k, ":left:") || at == -2 {
				continue
			}
			if strings.Contains(k, ":history:") {
				histories++
				assert.LessOrEqual(t, at, lobbyAt, "%s expires no later than the room counter", k)
				continue
			}
			assert.Equal(t, lobbyAt, at, "%s expires with the lobby's other keys", k)
		}
		assert.Equal(t, 1, histories, "the room's history is there")
	})

	t.Run("a lobby that comes back before the TTL keeps everything", func(t *testing.T) {
		room, err := s.Seats.Join(ctx, "back", "bob", ws1)
		require.NoError(t, err)
		assert.Equal(t, "back-1", room.ID)
		assert.Equal(t, time.Duration(-1), r.Client.PTTL(ctx, roomsKey(s.Seats.ks, "back")).Val())
		assert.Equal(t, time.Duration(-1), r.Client.PTTL(ctx, seqKey(s.Seats.ks, "back")).Val())
		assert.Equal(t, time.Duration(-1), r.Client.PTTL(ctx, recordsKey(s.Seats.ks, "back")).Val())
		ttl := r.Client.PTTL(ctx, historyKey(s.Seats.ks, "back", 1)).Val()
		assert.True(t, ttl > 0 && ttl <= idle, "the history lives on its own TTL (its last send or renewal + the idle TTL): %v", ttl)
		h, err := s.Messages.History(ctx, room.ID, "", 10)
		require.NoError(t, err)
		assert.Len(t, h, 1)
		assert.EqualValues(t, 1, r.Client.ZCard(ctx, lobbiesKey(s.Seats.ks)).Val(), "back in the sweeper's index")
		require.NoError(t, s.Seats.Leave(ctx, room.ID, "bob"))
		assert.Zero(t, r.Client.ZCard(ctx, lobbiesKey(s.Seats.ks)).Val())
	})

	t.Run("after the TTL no key of the lobbies is left", func(t *testing.T) {
		// The records of the says sent without a key live redisx.CallRecordTTL,
		// longer than this test's idle TTL.
		require.Eventually(t, func() bool {
			return len(scanLobbyKeys(t, r)) == 0
		}, max(10*idle, redisx.CallRecordTTL+10*time.Second), 100*time.Millisecond, "left: %v", scanLobbyKeys(t, r))
	})

	t.Run("a forgotten lobby starts over and works", func(t *testing.T) {
		room, err := s.Seats.Join(ctx, "l7", "carol", ws1)
		require.NoError(t, err)
		assert.Equal(t, Room{ID: "l7-1", Lobby: "l7", Seq: 1, Capacity: DefaultCapacity, Members: []string{"carol"}}, room)
		h, err := s.Messages.History(ctx, room.ID, "", 10)
		require.NoError(t, err)
		assert.Empty(t, h, "no history of the forgotten room 1")
		_, err = s.say(ctx, room.ID, "carol", "again")
		require.NoError(t, err)
		assert.Equal(t, time.Duration(-1), r.Client.PTTL(ctx, roomsKey(s.Seats.ks, "l7")).Val())
		assert.EqualValues(t, 1, r.Client.ZCard(ctx, lobbiesKey(s.Seats.ks)).Val())
	})
}

func TestALobbyWithSeatsHasNoExpiry(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(1), Now: clock.Now, Lease: func() time.Duration { return 2 * time.Second }})[0]
	for _, u := range []string{"a", "b"} {
		_, err := s.Seats.Join(ctx, "busy", u, ws1)
		require.NoError(t, err)
	}
	require.NoError(t, s.Seats.Leave(ctx, "busy-1", "a"))
	for _, k := range scanLobbyKeys(t, r) {
		// the lock, and the leave's record of its call (redisx.CallRecordTTL)
		if !strings.Contains(k, ":lock") && !strings.Contains(k, ":left:") {
			assert.Equal(t, time.Duration(-1), r.Client.PTTL(ctx, k).Val(), "%s of a lobby with a seat", k)
		}
	}

	t.Run("a reap of the last seat retires the lobby", func(t *testing.T) {
		clock.Add(3 * time.Second)
		n, err := s.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Zero(t, r.Client.ZCard(ctx, lobbiesKey(s.Seats.ks)).Val())
		assert.Greater(t, r.Client.PTTL(ctx, seqKey(s.Seats.ks, "busy")).Val(), time.Duration(0))
	})
}
