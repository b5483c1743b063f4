package rooms

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
)

func TestSeatCap(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			testSeatCap(t, srv.get(t))
		})
	}
}

func testSeatCap(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	clock := newClock()
	const lease = 10 * time.Second
	ss := nodes(t, r, 3, Config{MaxLobbiesPerUser: fixed(2), Now: clock.Now, Lease: func() time.Duration { return lease }})
	// seatedIn lists the lobbies where the seat data say alice sits.
	seatedIn := func(lobbies ...string) []string {
		t.Helper()
		var out []string
		for _, l := range lobbies {
			ok, err := ss[0].Seats.Seated(ctx, l+"-1", "alice")
			require.NoError(t, err)
			if ok {
				out = append(out, l)
			}
		}
		return out
	}

	lobbies := make([]string, 12)
	for i := range lobbies {
		lobbies[i] = fmt.Sprintf("c%d", i)
	}
	t.Run("concurrent joins of different lobbies: two pass, the rest are refused", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, len(lobbies))
		for i, l := range lobbies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = ss[i%3].Seats.Join(ctx, l, "alice", Attach{ID: "rest:" + l, REST: true})
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.ErrorIs(t, err, ErrTooManyLobbies)
			assert.Equal(t, errcode.RateLimited, errcode.Of(err))
			assert.Equal(t, "You hold seats in 2 lobbies, the most allowed; leave one first", errcode.Message(err))
		}
		assert.Equal(t, 2, ok)
		assert.Len(t, seatedIn(lobbies...), 2, "the seat data agree")
	})
	held := seatedIn(lobbies...)
	require.Len(t, held, 2)

	t.Run("a lobby the user sits in is joined again, whatever the count", func(t *testing.T) {
		_, err := ss[1].Seats.Join(ctx, held[0], "alice", Attach{ID: "ws:1"})
		require.NoError(t, err)
		_, err = ss[2].Seats.Reclaim(ctx, held[1]+"-1", "alice", Attach{ID: "ws:2"})
		require.NoError(t, err)
	})

	t.Run("a resume into a third lobby is refused", func(t *testing.T) {
		_, err := ss[0].Seats.Join(ctx, "third", "bob", ws1)
		require.NoError(t, err)
		_, err = ss[0].Seats.Reclaim(ctx, "third-1", "alice", ws1)
		require.ErrorIs(t, err, ErrTooManyLobbies)
		ok, err := ss[0].Seats.Seated(ctx, "third-1", "alice")
		require.NoError(t, err)
		assert.False(t, ok)
	})

	t.Run("leaving one lets the next in", func(t *testing.T) {
		require.NoError(t, ss[0].Seats.Leave(ctx, held[0]+"-1", "alice"))
		_, err := ss[1].Seats.Reclaim(ctx, "third-1", "alice", ws1)
		require.NoError(t, err)
		_, err = ss[2].Seats.Join(ctx, held[0], "alice", ws1)
		require.ErrorIs(t, err, ErrTooManyLobbies, "at the cap again")
	})

	t.Run("a join that certainly failed gives its place back", func(t *testing.T) {
		require.NoError(t, ss[0].Seats.Leave(ctx, "third-1", "alice"))
		_, err := ss[0].Seats.Reclaim(ctx, "nowhere-1", "alice", ws1)
		require.ErrorIs(t, err, ErrUnknownRoom)
		_, err = ss[0].Seats.Join(ctx, "fourth", "alice", ws1)
		require.NoError(t, err, "the failed reclaim holds no place")
	})

	t.Run("expired seats free their place", func(t *testing.T) {
		_, err := ss[0].Seats.Join(ctx, "fifth", "alice", ws1)
		require.ErrorIs(t, err, ErrTooManyLobbies)
		clock.Add(lease + time.Millisecond) // every seat of alice's lapses
		_, err = ss[0].Seats.Join(ctx, "fifth", "alice", ws1)
		require.NoError(t, err)
		_, err = ss[0].Seats.Join(ctx, "sixth", "alice", ws1)
		require.NoError(t, err)
		_, err = ss[0].Seats.Join(ctx, "seventh", "alice", ws1)
		require.ErrorIs(t, err, ErrTooManyLobbies)
	})

	t.Run("the user's index expires", func(t *testing.T) {
		ttl := r.Client.PTTL(ctx, userLobbiesKey(ss[0].Seats.ks, "alice")).Val()
		assert.Greater(t, ttl, time.Duration(0))
		assert.LessOrEqual(t, ttl, DefaultIdleTTL)
	})

	t.Run("without a cap nothing is counted or written", func(t *testing.T) {
		free := nodes(t, r, 1, Config{})[0]
		for i := range 5 {
			_, err := free.Seats.Join(ctx, fmt.Sprintf("free%d", i), "carol", ws1)
			require.NoError(t, err)
		}
		assert.Zero(t, r.Client.Exists(ctx, userLobbiesKey(free.Seats.ks, "carol")).Val())
	})
}

// TestSeatCapReservationInFlight: a join that reserved its lobby and has
// not seated yet counts, so a concurrent join cannot take the last place by
// dropping it as dead.
func TestSeatCapReservationInFlight(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{MaxLobbiesPerUser: fixed(1)})[0]
	resv, err := s.Seats.cap.reserve(ctx, "dave", "a")
	require.NoError(t, err)
	_, err = s.Seats.Join(ctx, "b", "dave", ws1)
	require.ErrorIs(t, err, ErrTooManyLobbies, "a's reservation is pending")
	s.Seats.cap.settle(ctx, resv, ErrRoomFull)
	_, err = s.Seats.Join(ctx, "b", "dave", ws1)
	require.NoError(t, err, "released")
	assert.False(t, errors.Is(err, ErrTooManyLobbies))
}
