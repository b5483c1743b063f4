package rooms

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

// TestServerAPIGrantAndRevokeAPrivateRoom: Grant lets a user claim a
// private room's seat and be listed among its players; Revoke takes them
// out and frees their seat; both are idempotent; a retried Create still
// answers the room; a public room, an unknown one and a full one are
// refused.
func TestServerAPIGrantAndRevokeAPrivateRoom(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(2), Now: clock.Now, Lease: func() time.Duration { return 40 * time.Second }})[0]
	room, err := s.Private.Create(ctx, "mm.duel.1", []string{"ann", "bob"}, 30*time.Second)
	require.NoError(t, err)

	_, err = s.Seats.Reclaim(ctx, room.ID, "eve", ws1)
	require.ErrorIs(t, err, ErrPrivateRoom)
	changed, err := s.Private.Grant(ctx, room.ID, "eve")
	require.NoError(t, err)
	assert.True(t, changed)
	changed, err = s.Private.Grant(ctx, room.ID, "EVE")
	require.NoError(t, err)
	assert.False(t, changed, "a retry (in any case) changes nothing")
	players, private, err := s.Private.Players(ctx, room.ID)
	require.NoError(t, err)
	assert.True(t, private)
	assert.Equal(t, []string{"ann", "bob", "eve"}, players)
	got, err := s.Seats.Reclaim(ctx, room.ID, "eve", ws1)
	require.NoError(t, err, "a granted user takes a seat, past the room's capacity of 2: a private room seats its users")
	assert.Contains(t, got.Members, "eve")

	again, err := s.Private.Create(ctx, "mm.duel.1", []string{"ann", "bob"}, 30*time.Second)
	require.NoError(t, err, "the matchmaker's retry still answers the room")
	assert.Equal(t, room.ID, again.ID)

	changed, err = s.Private.Revoke(ctx, room.ID, "eve")
	require.NoError(t, err)
	assert.True(t, changed)
	seated, err := s.Seats.Seated(ctx, room.ID, "eve")
	require.NoError(t, err)
	assert.False(t, seated, "the seat is freed")
	_, err = s.Seats.Reclaim(ctx, room.ID, "eve", ws1)
	assert.ErrorIs(t, err, ErrPrivateRoom)
	changed, err = s.Private.Revoke(ctx, room.ID, "eve")
	require.NoError(t, err)
	assert.False(t, changed)
	// a player the room was made for may be taken out too
	changed, err = s.Private.Revoke(ctx, room.ID, "bob")
	require.NoError(t, err)
	assert.True(t, changed)
	players, _, err = s.Private.Players(ctx, room.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"ann"}, players)

	pub, err := s.Seats.Join(ctx, "open", "mia", ws1)
	require.NoError(t, err)
	_, err = s.Private.Grant(ctx, pub.ID, "eve")
	assert.ErrorIs(t, err, ErrNotPrivate)
	_, err = s.Private.Revoke(ctx, pub.ID, "mia")
	assert.ErrorIs(t, err, ErrNotPrivate)
	_, err = s.Private.Grant(ctx, "mm.duel.2-1", "eve")
	assert.ErrorIs(t, err, ErrUnknownRoom)
	_, err = s.Private.Grant(ctx, room.ID, "a b")
	assert.ErrorIs(t, err, names.ErrBadName)

	users := make([]string, MaxPrivatePlayers)
	for i := range users {
		users[i] = "p" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	full, err := s.Private.Create(ctx, "mm.duel.3", users, 30*time.Second)
	require.NoError(t, err)
	_, err = s.Private.Grant(ctx, full.ID, "eve")
	assert.ErrorIs(t, err, ErrRoomFull)
}
