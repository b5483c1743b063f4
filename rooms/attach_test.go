package rooms

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
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

// attachments reads the lobby's attachment records straight from Redis and
// checks them against the seats: every seat has at least one attachment,
// every recorded attachment's user holds a seat and has its expiry in the
// attachments ZSET (and every entry there is recorded), and the REST index
// lists exactly the users with a REST attachment, with their room. It
// returns user → attachment ids.
func attachments(t testing.TB, r *redistest.Redis, lobby string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	ks := keyspace.New(r.Prefix)
	members, err := r.Client.ZRangeWithScores(ctx, membersKey(ks, lobby), 0, -1).Result()
	require.NoError(t, err)
	users := map[string]string{}
	for _, m := range members {
		users[m.Member.(string)] = strconv.Itoa(int(m.Score))
	}
	raw, err := r.Client.HGetAll(ctx, attIDsKey(ks, lobby)).Result()
	require.NoError(t, err)
	exps, err := r.Client.ZRange(ctx, attsKey(ks, lobby), 0, -1).Result()
	require.NoError(t, err)
	recorded := map[string]bool{}
	out := map[string][]string{}
	wantRest := map[string]float64{}
	for user, list := range raw {
		seq, ok := users[user]
		assert.True(t, ok, "%s has attachments %q but no seat", user, list)
		assert.NotEmpty(t, strings.Fields(list), "%s has an empty attachment record", user)
		for _, id := range strings.Fields(list) {
			if rest, ok := strings.CutPrefix(id, "+"); ok {
				id = rest
				n, _ := strconv.Atoi(seq)
				wantRest[user] = float64(n)
			}
			out[user] = append(out[user], id)
			recorded[user+" "+id] = true
		}
		sort.Strings(out[user])
	}
	for _, e := range exps {
		assert.True(t, recorded[e], "attachment %q has an expiry but no record", e)
	}
	for name := range recorded {
		_, err := r.Client.ZScore(ctx, attsKey(ks, lobby), name).Result()
		assert.NoError(t, err, "attachment %q has an expiry", name)
	}
	for user := range users {
		assert.NotEmpty(t, out[user], "%s holds a seat without any attachment", user)
	}
	rest, err := r.Client.ZRangeWithScores(ctx, restKey(ks, lobby), 0, -1).Result()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, z := range rest {
		got[z.Member.(string)] = z.Score
	}
	assert.Equal(t, wantRest, got, "REST index of %s", lobby)
	return out
}

func TestAttachments(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	clock := newClock()
	const lease = 10 * time.Second
	ss := nodes(t, r, 2, Config{Capacity: fixed(10), Now: clock.Now, Lease: func() time.Duration { return lease }})
	node1, node2 := ss[0], ss[1]
	rest := Attach{ID: "rest:s1", REST: true}
	sock := Attach{ID: "ws:n1:1"}

	t.Run("(a) a WebSocket detaching leaves the seat to the REST session, whose renewals keep it", func(t *testing.T) {
		room, err := node1.Seats.Join(ctx, "a", "alice", rest)
		require.NoError(t, err)
		_, err = node2.Seats.Join(ctx, "a", "alice", sock)
		require.NoError(t, err)
		assert.Equal(t, map[string][]string{"alice": {"rest:s1", "ws:n1:1"}}, attachments(t, r, "a"))
		res, err := node1.Messages.Send(ctx, room.ID, "alice", "hi", SendOptions{})
		require.NoError(t, err)
		assert.True(t, res.HasREST, "the room has a REST attachment")

		freed, err := node2.Seats.Detach(ctx, room.ID, "alice", sock.ID)
		require.NoError(t, err)
		assert.False(t, freed, "the REST session still holds the seat")
		for range 3 { // three renewals, each 0.7 lease apart: 2.1 leases in all
			clock.Add(lease * 7 / 10)
			lost, err := node1.Seats.Renew(ctx, []Attachment{{room.ID, "alice", rest.ID}})
			require.NoError(t, err)
			assert.Empty(t, lost)
			n, err := node2.Seats.Sweep(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)
		}
		got, err := node2.Seats.Room(ctx, room.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"alice"}, got.Members)
		assert.Equal(t, map[string][]string{"alice": {"rest:s1"}}, attachments(t, r, "a"))

		freed, err = node1.Seats.Detach(ctx, room.ID, "alice", rest.ID)
		require.NoError(t, err)
		assert.True(t, freed)
		_, err = node1.Messages.Send(ctx, room.ID, "alice", "bye", SendOptions{})
		assert.ErrorIs(t, err, ErrNotSeated)
		_, err = node1.Seats.Join(ctx, "a", "bob", sock)
		require.NoError(t, err)
		res, err = node1.Messages.Send(ctx, room.ID, "bob", "hi", SendOptions{})
		require.NoError(t, err)
		assert.False(t, res.HasREST, "no REST attachment left in the room")
	})

	t.Run("(b) a drained node's late detach leaves the seat its user reclaimed elsewhere", func(t *testing.T) {
		room, err := node1.Seats.Join(ctx, "b", "alice", Attach{ID: "n1:c1"})
		require.NoError(t, err)
		events := subscribe(t, r.NewClient(t), node1.Messages.Channel(room.ID))
		// node 1 drains: the client reconnects to node 2 and resumes there
		// before node 1 gets to detach its old connection.
		got, err := node2.Seats.Reclaim(ctx, room.ID, "alice", Attach{ID: "n2:c7"})
		require.NoError(t, err)
		assert.Equal(t, []string{"alice"}, got.Members)
		freed, err := node1.Seats.Detach(ctx, room.ID, "alice", "n1:c1")
		require.NoError(t, err)
		assert.False(t, freed)
		got, err = node1.Seats.Room(ctx, room.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"alice"}, got.Members, "listed once")
		assert.Equal(t, map[string][]string{"alice": {"n2:c7"}}, attachments(t, r, "b"))
		require.NoError(t, r.Client.Publish(ctx, node1.Messages.Channel(room.ID), "marker").Err())
		m := <-events
		assert.Equal(t, "marker", m.Payload, "no presence event: the seat never changed hands")

		t.Run("and in the other order the seat is taken back", func(t *testing.T) {
			freed, err := node2.Seats.Detach(ctx, room.ID, "alice", "n2:c7") // the old one goes first now
			require.NoError(t, err)
			assert.True(t, freed)
			_, err = node1.Seats.Reclaim(ctx, room.ID, "alice", Attach{ID: "n1:c2"})
			require.NoError(t, err)
			freed, err = node2.Seats.Detach(ctx, room.ID, "alice", "n2:c7") // a retry of the same detach
			require.NoError(t, err)
			assert.False(t, freed)
			assert.Equal(t, map[string][]string{"alice": {"n1:c2"}}, attachments(t, r, "b"))
		})
	})

	t.Run("(c) detaching the last attachment frees the seat and publishes left", func(t *testing.T) {
		room, err := node1.Seats.Join(ctx, "c", "alice", Attach{ID: "x1"})
		require.NoError(t, err)
		_, err = node1.Seats.Join(ctx, "c", "alice", Attach{ID: "x2"})
		require.NoError(t, err)
		events := subscribe(t, r.NewClient(t), node1.Messages.Channel(room.ID))
		freed, err := node2.Seats.Detach(ctx, room.ID, "alice", "x1")
		require.NoError(t, err)
		assert.False(t, freed)
		freed, err = node2.Seats.Detach(ctx, room.ID, "alice", "x2")
		require.NoError(t, err)
		assert.True(t, freed)
		assert.Equal(t, Event{Type: EventPresence, Room: room.ID, User: "alice", State: StateLeft}, nextEvent(t, events))
		ok, err := node1.Seats.Seated(ctx, room.ID, "alice")
		require.NoError(t, err)
		assert.False(t, ok)
		assert.Empty(t, attachments(t, r, "c"))
		_, err = node1.Seats.Detach(ctx, "c-9", "alice", "x2")
		assert.ErrorIs(t, err, ErrUnknownRoom)
		_, err = node1.Seats.Detach(ctx, room.ID, "alice", "bad id")
		assert.ErrorIs(t, err, ErrBadAttachment)
	})

	t.Run("(d) renewing a detached attachment reports it lost and recreates nothing", func(t *testing.T) {
		room, err := node1.Seats.Join(ctx, "d", "alice", Attach{ID: "y1"})
		require.NoError(t, err)
		_, err = node1.Seats.Join(ctx, "d", "alice", Attach{ID: "y2"})
		require.NoError(t, err)
		_, err = node1.Seats.Detach(ctx, room.ID, "alice", "y1")
		require.NoError(t, err)
		seats := leasesKey(node1.Seats.ks, "d")
		before := r.Client.ZScore(ctx, seats, "alice").Val()
		clock.Add(time.Second)
		lost, err := node1.Seats.Renew(ctx, []Attachment{{room.ID, "alice", "y1"}})
		require.NoError(t, err)
		assert.Equal(t, []Attachment{{room.ID, "alice", "y1"}}, lost)
		assert.Equal(t, before, r.Client.ZScore(ctx, seats, "alice").Val(), "a lost attachment extends no seat")
		assert.Equal(t, map[string][]string{"alice": {"y2"}}, attachments(t, r, "d"))

		_, err = node1.Seats.Detach(ctx, room.ID, "alice", "y2")
		require.NoError(t, err)
		lost, err = node1.Seats.Renew(ctx, []Attachment{{room.ID, "alice", "y2"}, {room.ID, "alice", "y1"}})
		require.NoError(t, err)
		assert.Len(t, lost, 2)
		ok, err := node1.Seats.Seated(ctx, room.ID, "alice")
		require.NoError(t, err)
		assert.False(t, ok, "the seat was not recreated")
		assert.Empty(t, attachments(t, r, "d"))
	})

	t.Run("(e) lease expiry reaps the seat and its attachments", func(t *testing.T) {
		room, err := node1.Seats.Join(ctx, "e", "alice", Attach{ID: "z1", REST: true})
		require.NoError(t, err)
		_, err = node2.Seats.Join(ctx, "e", "alice", Attach{ID: "z2"})
		require.NoError(t, err)
		_, err = node2.Seats.Join(ctx, "e", "bob", Attach{ID: "z3"})
		require.NoError(t, err)
		events := subscribe(t, r.NewClient(t), node1.Messages.Channel(room.ID))
		clock.Add(lease * 7 / 10)
		lost, err := node2.Seats.Renew(ctx, []Attachment{{room.ID, "bob", "z3"}})
		require.NoError(t, err)
		require.Empty(t, lost)
		clock.Add(lease*3/10 + time.Millisecond)
		_, err = node2.Seats.Sweep(ctx) // other subtests' lobbies expire too: count in this one
		require.NoError(t, err)
		assert.Equal(t, Event{Type: EventPresence, Room: room.ID, User: "alice", State: StateLeft}, nextEvent(t, events))
		got, err := node1.Seats.Room(ctx, room.ID)
		require.NoError(t, err)
		assert.Equal(t, []string{"bob"}, got.Members)
		assert.Equal(t, map[string][]string{"bob": {"z3"}}, attachments(t, r, "e"))
		assert.ErrorIs(t, r.Client.ZScore(ctx, restKey(node1.Seats.ks, "e"), "alice").Err(), redis.Nil, "the REST index lost alice")
		lost, err = node1.Seats.Renew(ctx, []Attachment{{room.ID, "alice", "z1"}, {room.ID, "alice", "z2"}})
		require.NoError(t, err)
		assert.Len(t, lost, 2)
	})

	t.Run("a renewal drops the user's expired attachments", func(t *testing.T) {
		room, err := node1.Seats.Join(ctx, "g", "alice", Attach{ID: "old", REST: true})
		require.NoError(t, err)
		clock.Add(lease / 2)
		_, err = node1.Seats.Join(ctx, "g", "alice", Attach{ID: "new"})
		require.NoError(t, err)
		clock.Add(lease/2 + time.Millisecond) // "old" expired, "new" lives
		lost, err := node1.Seats.Renew(ctx, []Attachment{{room.ID, "alice", "new"}, {room.ID, "alice", "old"}})
		require.NoError(t, err)
		assert.Equal(t, []Attachment{{room.ID, "alice", "old"}}, lost)
		assert.Equal(t, map[string][]string{"alice": {"new"}}, attachments(t, r, "g"))
	})

	t.Run("a detach shortens the seat's lease to its remaining attachments'", func(t *testing.T) {
		room, err := node1.Seats.Join(ctx, "h", "alice", Attach{ID: "early"})
		require.NoError(t, err)
		clock.Add(lease / 2)
		_, err = node1.Seats.Join(ctx, "h", "alice", Attach{ID: "late"})
		require.NoError(t, err)
		_, err = node1.Seats.Detach(ctx, room.ID, "alice", "late")
		require.NoError(t, err)
		clock.Add(lease/2 + time.Millisecond) // past "early"'s lease
		_, err = node1.Seats.Sweep(ctx)
		require.NoError(t, err)
		assert.Zero(t, r.Client.ZCount(ctx, membersKey(node1.Seats.ks, "h"), "1", "1").Val(), "the seat went with its last attachment's lease")
		assert.Empty(t, attachments(t, r, "h"))
	})
}

// TestConcurrentAttachDetachOfOneUser hammers one user's seat from three
// clients (three nodes) with joins, reclaims, detaches and renewals of
// attachments, then checks that the seat is held exactly while some
// attachment is, and by exactly the attachments the workers believe live.
func TestConcurrentAttachDetachOfOneUser(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	ss := nodes(t, r, 3, Config{Capacity: fixed(5)})
	const lobby, user, ops = "hammer", "alice", 600
	_, err := ss[0].Seats.Join(ctx, lobby, "anchor", Attach{ID: "anchor"}) // room 1 exists throughout
	require.NoError(t, err)
	live := make([]map[string]bool, 3)
	var wg sync.WaitGroup
	for w := range 3 {
		live[w] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := ss[w]
			mine := live[w]
			for i := range ops {
				var held []string
				for id := range mine {
					held = append(held, id)
				}
				sort.Strings(held)
				switch op := rand.IntN(4); {
				case op == 0 || len(held) == 0:
					id := fmt.Sprintf("w%d:%d", w, i)
					if _, err := s.Seats.Join(ctx, lobby, user, Attach{ID: id, REST: i%3 == 0}); assert.NoError(t, err) {
						mine[id] = true
					}
				case op == 1:
					id := fmt.Sprintf("w%d:%d", w, i)
					_, err := s.Seats.Reclaim(ctx, lobby+"-1", user, Attach{ID: id})
					if assert.NoError(t, err) {
						mine[id] = true
					}
				case op == 2:
					id := held[rand.IntN(len(held))]
					_, err := s.Seats.Detach(ctx, lobby+"-1", user, id)
					assert.NoError(t, err)
					delete(mine, id)
				default:
					var atts []Attachment
					for _, id := range held {
						atts = append(atts, Attachment{lobby + "-1", user, id})
					}
					lost, err := s.Seats.Renew(ctx, atts)
					assert.NoError(t, err)
					assert.Empty(t, lost, "a live attachment is never lost")
				}
			}
		}()
	}
	wg.Wait()
	var want []string
	for _, m := range live {
		for id := range m {
			want = append(want, id)
		}
	}
	sort.Strings(want)
	got := attachments(t, r, lobby)
	assert.Equal(t, want, got[user], "exactly the attachments the workers hold are recorded")
	ok, err := ss[0].Seats.Seated(ctx, lobby+"-1", user)
	require.NoError(t, err)
	assert.Equal(t, len(want) > 0, ok, "seated exactly while attached")
	room, err := ss[1].Seats.Room(ctx, lobby+"-1")
	require.NoError(t, err)
	if len(want) > 0 {
		assert.Equal(t, []string{"alice", "anchor"}, room.Members)
	}
	for w := range 3 { // detach everything: the seat goes with the last one
		for id := range live[w] {
			_, err := ss[w].Seats.Detach(ctx, lobby+"-1", user, id)
			require.NoError(t, err)
		}
	}
	ok, err = ss[0].Seats.Seated(ctx, lobby+"-1", user)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.Equal(t, map[string][]string{"anchor": {"anchor"}}, attachments(t, r, lobby))
	checkLobby(t, r, lobby, 5)
}

func TestLeaveFreesEveryAttachment(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]
	room, err := s.Seats.Join(ctx, "l", "alice", Attach{ID: "a", REST: true})
	require.NoError(t, err)
	_, err = s.Seats.Join(ctx, "l", "alice", Attach{ID: "b"})
	require.NoError(t, err)
	_, err = s.Seats.Join(ctx, "l", "bob", Attach{ID: "c"})
	require.NoError(t, err)
	require.NoError(t, s.Seats.Leave(ctx, room.ID, "alice"))
	assert.Equal(t, map[string][]string{"bob": {"c"}}, attachments(t, r, "l"))
	lost, err := s.Seats.Renew(ctx, []Attachment{{room.ID, "alice", "a"}, {room.ID, "alice", "b"}, {room.ID, "bob", "c"}})
	require.NoError(t, err)
	assert.Len(t, lost, 2)
	freed, err := s.Seats.Detach(ctx, room.ID, "alice", "a")
	require.NoError(t, err)
	assert.False(t, freed)
}

func TestBadAttachmentIDsAreRefused(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]
	long := string(make([]byte, 65))
	for _, id := range []string{"", "a b", "a{b}", long, "é"} {
		_, err := s.Seats.Join(ctx, "g", "alice", Attach{ID: id})
		assert.ErrorIs(t, err, ErrBadAttachment, "%q", id)
	}
	_, err := s.Seats.Join(ctx, "g", "alice", Attach{ID: "Ok_1:2.3-4"})
	assert.NoError(t, err)
	_, err = s.Seats.Reclaim(ctx, "g-1", "alice", Attach{})
	assert.ErrorIs(t, err, ErrBadAttachment)
}
