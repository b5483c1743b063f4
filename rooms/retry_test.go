package rooms

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/redisx"
)

var retryBackends = []redistest.Backend{{Name: "single server", Start: redistest.New}, {Name: "cluster", Start: redistest.Cluster}}

// resending returns a Service on r (not started) whose calls of the script
// named script are sent twice when the returned hook is armed.
func resending(t *testing.T, r *redistest.Redis, script string) (*Service, *redistest.Resend) {
	t.Helper()
	h := redistest.ResendScript(script)
	s, err := New(h.Client(t, r), Config{Prefix: r.Prefix, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	return s, h
}

// TestRetriedLeaveFreesNoSeatTakenMeanwhile: go-redis sends a call again
// when its reply is late, and the first copy may have run. A Leave's
// second copy, coming after the user's other connection took the seat in
// the room again, freed that new seat: the user was seated and the seat
// was gone, with no "left" the client asked for. The second copy must
// answer the first one's result and change nothing, whatever the first
// answered; the call must end within redisx.CallBound and its record live
// redisx.CallRecordTTL at most.
func TestRetriedLeaveFreesNoSeatTakenMeanwhile(t *testing.T) {
	t.Parallel()
	redistest.Each(t, retryBackends, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		a, h := resending(t, r, "rooms.seat_release")
		b := nodes(t, r, 1, Config{})[0]

		t.Run("a retried leave keeps the seat taken again between the copies", func(t *testing.T) {
			room, err := b.Seats.Join(ctx, "l", "alice", Attach{ID: "c1"})
			require.NoError(t, err)
			h.Arm(func() {
				again, err := b.Seats.Join(ctx, "l", "alice", Attach{ID: "c2"})
				require.NoError(t, err)
				require.Equal(t, room.ID, again.ID)
			})
			start := time.Now()
			require.NoError(t, a.Seats.Leave(ctx, room.ID, "alice"), "the retry answers the first copy's leave")
			end := time.Now()
			cmd, deadline := h.Resent(t)
			assert.WithinRange(t, deadline, start.Add(redisx.CallBound), end.Add(redisx.CallBound), "the call ends redisx.CallBound after its start")
			assert.Equal(t, map[string][]string{"alice": {"c2"}}, attachments(t, r, "l"), "the seat taken between the copies stands")
			keys := cmd.Args()[3 : 3+15]
			rec, _ := keys[14].(string)
			assert.True(t, strings.HasPrefix(rec, r.Prefix+":{lobby:l}:left:"), "record key %s", rec)
			ttl, err := r.Client.PTTL(ctx, rec).Result()
			require.NoError(t, err)
			assert.True(t, ttl > 0 && ttl <= redisx.CallRecordTTL, "the record lives %v", ttl)
		})

		t.Run("a retried leave of no seat stays one", func(t *testing.T) {
			room, err := b.Seats.Join(ctx, "m", "bob", Attach{ID: "c3"})
			require.NoError(t, err)
			require.NoError(t, b.Seats.Leave(ctx, room.ID, "bob"))
			h.Arm(func() {
				_, err := b.Seats.Join(ctx, "m", "bob", Attach{ID: "c4"})
				require.NoError(t, err)
			})
			assert.ErrorIs(t, a.Seats.Leave(ctx, room.ID, "bob"), ErrNotSeated, "the first copy found no seat")
			assert.Equal(t, map[string][]string{"bob": {"c4"}}, attachments(t, r, "m"))
		})

		t.Run("the retry of the leave that emptied the lobby still retires it", func(t *testing.T) {
			room, err := b.Seats.Join(ctx, "n", "cat", Attach{ID: "c5"})
			require.NoError(t, err)
			h.Arm(nil)
			require.NoError(t, a.Seats.Leave(ctx, room.ID, "cat"))
			assert.Zero(t, r.Client.ZScore(ctx, lobbiesKey(a.Seats.ks), "n").Val(), "out of the sweeper's index")
			assert.Positive(t, r.Client.PTTL(ctx, roomsKey(a.Seats.ks, "n")).Val(), "the idle lobby expires")
		})
	})
}

// TestRetriedRoomCountIsCountedOnce: the global count of rooms created was
// a bare INCRBY (INCR for a private room) after the creation's script, and
// go-redis's retry of a late one counted the rooms twice. Each count now
// carries its call's token.
func TestRetriedRoomCountIsCountedOnce(t *testing.T) {
	t.Parallel()
	redistest.Each(t, retryBackends, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		s, h := resending(t, r, "rooms.counter_add")
		require.NoError(t, s.Seats.Start(ctx))
		t.Cleanup(func() { assert.NoError(t, s.Seats.Close(context.Background())) })
		rooms := func() int64 {
			_, n, err := s.Messages.Counters(ctx)
			require.NoError(t, err)
			return n
		}

		h.Arm(nil)
		_, err := s.Seats.Join(ctx, "c", "alice", Attach{ID: "c1"})
		require.NoError(t, err)
		h.Resent(t)
		assert.EqualValues(t, 1, rooms(), "a joined lobby's first room, counted once")

		h.Arm(nil)
		_, err = s.Private.CreateRoom(ctx, "mm.duel.1-1", []string{"ann", "bob"}, 30*time.Second)
		require.NoError(t, err)
		h.Resent(t)
		assert.EqualValues(t, 2, rooms(), "a private room, counted once")
	})
}

// TestRetriedRemoveAnswersTheFirstCopy: the Redis client's retry of a late
// removal answered "no such message" (ErrNoMessage, a 404 to the admin)
// for the message its first copy removed, and published nothing twice. It
// now answers the first copy's result; another removal of it is still
// ErrNoMessage.
func TestRetriedRemoveAnswersTheFirstCopy(t *testing.T) {
	t.Parallel()
	redistest.Each(t, retryBackends, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		a, h := resending(t, r, "rooms.message_remove")
		b := nodes(t, r, 1, Config{})[0]
		room, err := b.Seats.Join(ctx, "rm", "alice", Attach{ID: "c1"})
		require.NoError(t, err)
		m, err := b.say(ctx, room.ID, "alice", "oops")
		require.NoError(t, err)
		events := subscribe(t, r.Client, channel(b.Seats.ks, "rm", 1))

		h.Arm(nil)
		require.NoError(t, a.Messages.Remove(ctx, room.ID, m.ID), "the retry answers the first copy's removal")
		h.Resent(t)
		assert.ErrorIs(t, b.Messages.Remove(ctx, room.ID, m.ID), ErrNoMessage, "another removal finds it gone")
		select {
		case e := <-events:
			assert.Contains(t, e.Payload, EventRemoved)
		case <-time.After(5 * time.Second):
			t.Fatal("no message_removed")
		}
		select {
		case e := <-events:
			t.Fatalf("a second event: %s", e.Payload)
		case <-time.After(200 * time.Millisecond):
		}
	})
}
