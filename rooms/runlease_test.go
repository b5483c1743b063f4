package rooms

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

// Attachments bound to a node's run (Attach.Run) live with the run's
// lease in their lobby, which KeepRun renews once per lobby per tick.

const runLease = 10 * time.Second

// runNodes returns 3 nodes on r sharing clock, with capacity 50 and the
// run lease.
func runNodes(t *testing.T, r *redistest.Redis, clock interface{ Now() time.Time }) []*Service {
	return nodes(t, r, 3, Config{Capacity: fixed(50), Now: clock.Now, Lease: func() time.Duration { return runLease }})
}

// onRun is ws1 bound to run.
func onRun(run string) Attach { return Attach{ID: "ws1", Run: run} }

func TestRunBoundSeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a dead run's seats come back one run lease after its last keep, with left", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		room, err := ss[0].Seats.Join(ctx, "dead", "ann", onRun("runA"))
		require.NoError(t, err)
		_, err = ss[0].Seats.Join(ctx, "dead", "bob", onRun("runA"))
		require.NoError(t, err)
		_, err = ss[1].Seats.Join(ctx, "dead", "cat", onRun("runB"))
		require.NoError(t, err)
		events := subscribe(t, r.Client, ss[0].Messages.Channel(room.ID))

		// Both runs keep for a while: the seats outlive their first lease.
		for range 3 {
			clock.Add(runLease / 2)
			lost, err := ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann", "bob"))
			require.NoError(t, err)
			assert.Empty(t, lost)
			lost, err = ss[1].Seats.KeepRun(ctx, "runB", attsOf(room.ID, "cat"))
			require.NoError(t, err)
			assert.Empty(t, lost)
			n := sweep(t, ss[2])
			assert.Zero(t, n, "a kept run's seats are not reaped")
		}
		// runA dies: runB keeps on, and a third node sweeps.
		clock.Add(runLease / 2)
		_, err = ss[1].Seats.KeepRun(ctx, "runB", attsOf(room.ID, "cat"))
		require.NoError(t, err)
		n := sweep(t, ss[2])
		assert.Zero(t, n, "within the run's lease nothing is reaped")
		clock.Add(runLease/2 + time.Millisecond)
		_, err = ss[1].Seats.KeepRun(ctx, "runB", attsOf(room.ID, "cat"))
		require.NoError(t, err)
		n = sweep(t, ss[2])
		assert.Equal(t, 2, n, "runA's two seats are reaped once its lease is over")
		left := map[string]bool{}
		for range 2 {
			e := nextEvent(t, events)
			assert.Equal(t, "left", e.State)
			left[e.User] = true
		}
		assert.Equal(t, map[string]bool{"ann": true, "bob": true}, left)
		assert.Equal(t, []string{"cat"}, membersOf(t, ss[2], room.ID), "runB's seat stays")
		_, seats := checkLobby(t, r, "dead", 50)
		assert.Equal(t, 1, seats)
		ks := keyspace.New(r.Prefix)
		assert.Empty(t, r.Client.ZRangeByLex(ctx, runAttsKey(ks, "dead"), &redis.ZRangeBy{Min: "[runA ", Max: "[runA \xff"}).Val(),
			"runA's index is gone")
	})

	t.Run("a seat held by a live run's connection too survives the other run's death", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		room, err := ss[0].Seats.Join(ctx, "two", "ann", onRun("runA"))
		require.NoError(t, err)
		_, err = ss[1].Seats.Join(ctx, "two", "ann", Attach{ID: "ws2", Run: "runB"})
		require.NoError(t, err)
		for range 4 {
			clock.Add(runLease / 2)
			_, err = ss[1].Seats.KeepRun(ctx, "runB", []Attachment{{Room: room.ID, User: "ann", ID: "ws2"}})
			require.NoError(t, err)
			sweep(t, ss[2])
		}
		assert.Equal(t, []string{"ann"}, membersOf(t, ss[2], room.ID), "ann's seat stays with runB's connection")
		lost, err := ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann"))
		require.NoError(t, err)
		assert.Equal(t, attsOf(room.ID, "ann"), lost, "runA's connection learns its attachment is gone")
	})

	t.Run("a paused run learns its attachments are lost and takes a free seat back", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		room, err := ss[0].Seats.Join(ctx, "pause", "ann", onRun("runA"))
		require.NoError(t, err)
		_, err = ss[0].Seats.Join(ctx, "pause", "bob", onRun("runA"))
		require.NoError(t, err)
		_, err = ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann", "bob"))
		require.NoError(t, err)
		clock.Add(runLease + time.Second) // paused past its lease
		n := sweep(t, ss[1])
		assert.Equal(t, 2, n)
		lost, err := ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann", "bob"))
		require.NoError(t, err)
		assert.ElementsMatch(t, attsOf(room.ID, "ann", "bob"), lost, "every attachment of the paused run is lost")
		_, err = ss[0].Seats.Reclaim(ctx, room.ID, "ann", onRun("runA"))
		require.NoError(t, err)
		lost, err = ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann"))
		require.NoError(t, err)
		assert.Empty(t, lost, "the reclaimed seat is kept again")
	})

	t.Run("a paused run's attachments end at its first script even before a sweep", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		room, err := ss[0].Seats.Join(ctx, "nosweep", "ann", onRun("runA"))
		require.NoError(t, err)
		clock.Add(runLease + time.Second)
		lost, err := ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann"))
		require.NoError(t, err)
		assert.Equal(t, attsOf(room.ID, "ann"), lost)
		assert.Empty(t, membersOf(t, ss[1], room.ID))
	})

	t.Run("an attachment the run no longer holds ends one lease after it was last kept", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		room, err := ss[0].Seats.Join(ctx, "ghost", "ann", onRun("runA"))
		require.NoError(t, err)
		_, err = ss[0].Seats.Join(ctx, "ghost", "bob", onRun("runA"))
		require.NoError(t, err)
		// bob's connection closed and its Detach was lost: runA keeps ann only.
		for range 4 {
			clock.Add(runLease / 3)
			lost, err := ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann"))
			require.NoError(t, err)
			assert.Empty(t, lost)
		}
		sweep(t, ss[1])
		assert.Equal(t, []string{"ann"}, membersOf(t, ss[1], room.ID), "bob's stranded seat is gone")
	})

	t.Run("a lobby lost from the sweeper's index is back by the run's next full round", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		room, err := ss[0].Seats.Join(ctx, "lost", "ann", onRun("runA"))
		require.NoError(t, err)
		index := lobbiesKey(ss[0].Seats.ks)
		_, err = ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann")) // the first is a full round
		require.NoError(t, err)
		require.NoError(t, r.Client.ZRem(ctx, index, "lost").Err())
		lost, err := ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann"))
		require.NoError(t, err)
		assert.Empty(t, lost)
		_, err = r.Client.ZScore(ctx, index, "lost").Result()
		assert.ErrorIs(t, err, redis.Nil, "a tick's keep does not write the index")
		every := ss[0].Seats.holdDur() / 3
		for kept := time.Duration(0); kept <= every; kept += runLease / 2 {
			clock.Add(runLease / 2)
			_, err := ss[0].Seats.KeepRun(ctx, "runA", attsOf(room.ID, "ann"))
			require.NoError(t, err)
		}
		_, err = r.Client.ZScore(ctx, index, "lost").Result()
		require.NoError(t, err, "back in the sweeper's index within a third of the hold")
		// and the sweeper reaps the run's seat once the run is gone
		clock.Add(runLease + time.Millisecond)
		assert.Equal(t, 1, sweep(t, ss[1]))
	})

	t.Run("on a Redis Cluster a dead run's seats are reaped too", func(t *testing.T) {
		t.Parallel()
		r := redistest.Cluster(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		room, err := ss[0].Seats.Join(ctx, "cl", "ann", onRun("runA"))
		require.NoError(t, err)
		_, err = ss[1].Seats.Join(ctx, "cl", "bob", onRun("runB"))
		require.NoError(t, err)
		clock.Add(runLease / 2)
		lost, err := ss[1].Seats.KeepRun(ctx, "runB", attsOf(room.ID, "bob"))
		require.NoError(t, err)
		assert.Empty(t, lost)
		clock.Add(runLease/2 + time.Millisecond)
		n := sweep(t, ss[2])
		assert.Equal(t, 1, n)
		assert.Equal(t, []string{"bob"}, membersOf(t, ss[2], room.ID))
	})

	t.Run("REST attachments keep their own leases beside a run's", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		clock := newClock()
		ss := runNodes(t, r, clock)
		rest := Attach{ID: "rest:s1", REST: true}
		room, err := ss[0].Seats.Join(ctx, "rest", "ann", rest)
		require.NoError(t, err)
		_, err = ss[1].Seats.Join(ctx, "rest", "ann", onRun("runB"))
		require.NoError(t, err)
		_, err = ss[0].Seats.Join(ctx, "rest", "bob", rest)
		require.NoError(t, err)
		for range 4 {
			clock.Add(runLease / 2)
			lost, err := ss[0].Seats.Renew(ctx, []Attachment{{Room: room.ID, User: "bob", ID: rest.ID}})
			require.NoError(t, err)
			assert.Empty(t, lost, "bob's polls keep his seat")
			sweep(t, ss[2])
		}
		assert.Equal(t, []string{"bob"}, membersOf(t, ss[2], room.ID), "ann's REST session stopped polling and runB died")
	})

	t.Run("a bad run is refused", func(t *testing.T) {
		t.Parallel()
		r := redistest.Real(t)
		s := nodes(t, r, 1, Config{})[0]
		for _, run := range []string{"a b", "a:b", "a@b", strings.Repeat("r", 65)} {
			_, err := s.Seats.Join(ctx, "bad", "ann", onRun(run))
			assert.ErrorIs(t, err, ErrBadAttachment, "%q", run)
			_, err = s.Seats.KeepRun(ctx, run, attsOf("bad-1", "ann"))
			assert.ErrorIs(t, err, ErrBadAttachment, "%q", run)
		}
		_, err := s.Seats.KeepRun(ctx, "", attsOf("bad-1", "ann"))
		assert.ErrorIs(t, err, ErrBadAttachment, "an empty run")
	})
}

func TestIdleRunKeepCostsPerLobbyNotPerAttachment(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{}) // its own server: it counts every command
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Capacity: fixed(5000), Now: clock.Now, Lease: func() time.Duration { return runLease }})[0]
	seat := func(lobby string, n int) []Attachment {
		atts := make([]Attachment, n)
		var wg sync.WaitGroup
		for i := range n { // concurrent: the group commit seats them in batches
			wg.Add(1)
			go func() {
				defer wg.Done()
				u := fmt.Sprintf("u%d", i)
				room, err := s.Seats.Join(ctx, lobby, u, onRun("runA"))
				assert.NoError(t, err)
				atts[i] = Attachment{Room: room.ID, User: u, ID: "ws1"}
			}()
		}
		wg.Wait()
		return atts
	}
	// Past 2,000 attachments a renewal one by one takes more bulk commands
	// (1,000 arguments each): the count tells O(N) from O(lobbies).
	small, big := seat("small", 10), seat("big", 2500)
	tick := func(atts []Attachment) int {
		t.Helper()
		before := commandCalls(t, r.Client)
		clock.Add(runLease / 3)
		lost, err := s.Seats.KeepRun(ctx, "runA", atts)
		require.NoError(t, err)
		require.Empty(t, lost)
		return int(commandCalls(t, r.Client) - before)
	}
	for range 2 { // the first keep renews one by one; the first light one loads its script
		tick(small)
		tick(big)
	}
	costSmall, costBig := tick(small), tick(big)
	t.Logf("commands per idle tick: 10 attachments %d, 3000 attachments %d", costSmall, costBig)
	assert.Equal(t, costSmall, costBig, "an idle tick costs the same commands for 10 and 3,000 attachments")
	assert.LessOrEqual(t, costBig, 12, "an idle tick of one lobby is a handful of commands")
}
