package matchmaking

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

func TestNotifyRecordsAndPublishes(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := New(r.NewClient(t), Config{Prefix: r.Prefix, StatusTTL: time.Minute})
	sub := r.NewClient(t).Subscribe(ctx, s.Channel())
	t.Cleanup(func() { _ = sub.Close() })
	_, err := sub.Receive(ctx)
	require.NoError(t, err)

	m := Match{ID: "duel-3", Queue: "duel", Seq: 3, Created: time.UnixMilli(1_000),
		Tickets: []Ticket{{ID: "T1", User: "ann", Party: []string{"bob"}}, {ID: "T2", User: "cy"}}, Players: []string{"ann", "bob", "cy"}}
	notes := MatchedEvents(m, MatchLobby(m)+"-1", 30*time.Second)
	require.Len(t, notes, 2)
	assert.Equal(t, []string{"ann", "bob"}, notes[0].Users)
	assert.Equal(t, "mm.duel.3-1", notes[0].Event.Room)

	require.NoError(t, s.Notify(ctx, notes))
	require.NoError(t, s.Notify(ctx, notes), "a hook run twice")
	select {
	case msg := <-sub.Channel():
		got, err := DecodeNotices([]byte(msg.Payload))
		require.NoError(t, err)
		assert.Equal(t, notes, got)
	case <-time.After(10 * time.Second):
		t.Fatal("nothing published")
	}

	t.Run("each player has the event once, with a TTL", func(t *testing.T) {
		for _, u := range []string{"ann", "Bob", "cy"} {
			evs, err := s.Events(ctx, u)
			require.NoError(t, err)
			require.Len(t, evs, 1, u)
			assert.Equal(t, EventMatched, evs[0].Type)
			assert.Equal(t, 30, evs[0].ReserveSeconds)
			assert.Positive(t, r.Client.PTTL(ctx, userEvents(s.ks, u)).Val())
		}
	})
	t.Run("an expiry comes first, and the list is capped", func(t *testing.T) {
		for i := range MaxUserEvents + 3 {
			require.NoError(t, s.Notify(ctx, []Notice{ExpiredEvent(Ticket{ID: "X" + string(rune('A'+i)), Queue: "duel", User: "cy"}, time.UnixMilli(2_000))}))
		}
		evs, err := s.Events(ctx, "cy")
		require.NoError(t, err)
		require.Len(t, evs, MaxUserEvents)
		assert.Equal(t, EventExpired, evs[0].Type)
	})
}
