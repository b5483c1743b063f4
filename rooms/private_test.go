package rooms

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

func TestPrivateRoom(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(50), Now: clock.Now, Lease: func() time.Duration { return 40 * time.Second }})[0]

	room, err := s.Private.Create(ctx, "mm.duel.1", []string{"ann", "bob", "cy"}, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "mm.duel.1-1", room.ID)
	assert.Equal(t, []string{"ann", "bob", "cy"}, room.Members, "every player's seat is reserved")

	t.Run("a retry answers the same room", func(t *testing.T) {
		again, err := s.Private.Create(ctx, "mm.duel.1", []string{"ann", "bob", "cy"}, 30*time.Second)
		require.NoError(t, err)
		assert.Equal(t, room.ID, again.ID)
		_, err = s.Private.Create(ctx, "mm.duel.1", []string{"ann", "eve"}, 30*time.Second)
		assert.ErrorIs(t, err, ErrLobbyTaken)
	})

	t.Run("a retry puts the lobby in the sweeper's index", func(t *testing.T) {
		// The first call woke the lobby, but its answer was lost (go-redis
		// sends the script again after a read timeout): nobody put the
		// lobby in the index, and a reservation nobody attaches to would
		// never be reaped, nor the lobby's keys given their idle TTL.
		require.NoError(t, r.Client.ZRem(ctx, lobbiesKey(s.Seats.ks), "mm.duel.1").Err())
		again, err := s.Private.Create(ctx, "mm.duel.1", []string{"ann", "bob", "cy"}, 30*time.Second)
		require.NoError(t, err)
		assert.Equal(t, room.ID, again.ID)
		_, err = r.Client.ZScore(ctx, lobbiesKey(s.Seats.ks), "mm.duel.1").Result()
		assert.NoError(t, err, "indexed again by the retry")
	})

	t.Run("a lobby join is refused and creates nothing", func(t *testing.T) {
		_, err := s.Seats.Join(ctx, "mm.duel.1", "eve", ws1)
		assert.ErrorIs(t, err, ErrPrivateRoom)
		_, err = s.Seats.Join(ctx, "mm.duel.1", "ann", ws1)
		assert.ErrorIs(t, err, ErrPrivateRoom, "a player too joins by the room id, not the lobby")
		nrooms, _ := checkLobby(t, r, "mm.duel.1", 0)
		assert.Equal(t, 1, nrooms)
	})

	t.Run("a stranger cannot take the room", func(t *testing.T) {
		_, err := s.Seats.Reclaim(ctx, room.ID, "eve", ws1)
		assert.ErrorIs(t, err, ErrPrivateRoom)
	})

	t.Run("a player takes their seat by the room id", func(t *testing.T) {
		got, err := s.Seats.Reclaim(ctx, room.ID, "ann", ws1)
		require.NoError(t, err)
		assert.Equal(t, room.ID, got.ID)
		_, err = s.Messages.Send(ctx, room.ID, "ann", "gg", SendOptions{})
		require.NoError(t, err)
	})

	t.Run("the lobby is never listed", func(t *testing.T) {
		list, err := s.Lobbies.List(ctx, 100)
		require.NoError(t, err)
		for _, l := range list {
			assert.NotEqual(t, "mm.duel.1", l.Lobby)
		}
	})

	t.Run("an unclaimed seat is released after its reservation", func(t *testing.T) {
		_, err := s.Seats.Reclaim(ctx, room.ID, "bob", ws1)
		require.NoError(t, err)
		// ann's and bob's seats live by their attachments (lease 40s); cy
		// never came.
		clock.Add(35 * time.Second)
		_, err = s.Seats.Sweep(ctx)
		require.NoError(t, err)
		got, err := s.Seats.Room(ctx, room.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"ann", "bob"}, got.Members)
		ok, err := s.Seats.Seated(ctx, room.ID, "cy")
		require.NoError(t, err)
		assert.False(t, ok)
	})

	t.Run("bad input", func(t *testing.T) {
		_, err := s.Private.Create(ctx, "mm.x.1", nil, time.Second)
		assert.Error(t, err)
		_, err = s.Private.Create(ctx, "mm.x.1", []string{"a", "a"}, time.Second)
		assert.Error(t, err)
		_, err = s.Seats.Join(ctx, "general", "zed", ws1)
		require.NoError(t, err)
		_, err = s.Private.Create(ctx, "general", []string{"zed"}, time.Second)
		assert.True(t, errors.Is(err, ErrLobbyTaken), "a public lobby is not made private: %v", err)
	})
}

// TestPrivateRoomOfAGivenNumber: CreatePrivateRoom makes the room under the
// number asked (a PrivateRoomSeq: 12 digits, the same for the same key and
// name, another for another key), a retry answers it whatever number it
// asks, and room 1 of its lobby does not exist.
func TestPrivateRoomOfAGivenNumber(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{Capacity: fixed(50), Now: newClock().Now})[0]
	seq := PrivateRoomSeq([]byte("key-a"), "duel-7")
	assert.Equal(t, seq, PrivateRoomSeq([]byte("key-a"), "duel-7"), "one number per key and name")
	assert.NotEqual(t, seq, PrivateRoomSeq([]byte("key-b"), "duel-7"))
	assert.NotEqual(t, seq, PrivateRoomSeq([]byte("key-a"), "duel-8"))
	assert.Len(t, strconv.Itoa(seq), 12)

	id := "mm.duel.7-" + strconv.Itoa(seq)
	room, err := s.Private.CreateRoom(ctx, id, []string{"ann", "bob"}, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, id, room.ID)
	assert.Equal(t, []string{"ann", "bob"}, room.Members)
	again, err := s.Private.CreateRoom(ctx, "mm.duel.7-1", []string{"ann", "bob"}, 30*time.Second)
	require.NoError(t, err)
	assert.Equal(t, id, again.ID, "a retry answers the room as it was made")
	_, err = s.Seats.Room(ctx, "mm.duel.7-1")
	assert.ErrorIs(t, err, ErrUnknownRoom)
	got, err := s.Seats.Reclaim(ctx, id, "ann", ws1)
	require.NoError(t, err)
	assert.Equal(t, id, got.ID)
	_, err = s.Messages.Send(ctx, id, "ann", "gg", SendOptions{})
	require.NoError(t, err)
	msgs, err := s.Messages.History(ctx, id, "", 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	players, private, err := s.Private.Players(ctx, id)
	require.NoError(t, err)
	assert.True(t, private)
	assert.Equal(t, []string{"ann", "bob"}, players)
	_, err = s.Seats.Reclaim(ctx, id, "eve", ws1)
	assert.ErrorIs(t, err, ErrPrivateRoom)
}
