package rooms

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/embedded"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

func newClock() *testkit.Clock {
	return testkit.NewClock(time.UnixMilli(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).UnixMilli())) // in time.Local, as the services read times back
}

// nodes returns n started Services on r, each with its own client (a
// simulated chatd node), all sharing cfg and one fresh registry; they are
// closed when the test ends.
func nodes(t testing.TB, r *redistest.Redis, n int, cfg Config) []*Service {
	t.Helper()
	cfg.Prefix = r.Prefix
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	out := make([]*Service, n)
	for i := range out {
		s, err := New(r.NewClient(t), cfg)
		require.NoError(t, err)
		require.NoError(t, s.Seats.Start(context.Background())) // group commit, as a node runs it
		t.Cleanup(func() { assert.NoError(t, s.Seats.Close(context.Background())) })
		out[i] = s
	}
	return out
}

func fixed(n int) func() int { return func() int { return n } }

// subscribe subscribes to the room's channel and returns its messages.
func subscribe(t *testing.T, rdb redis.UniversalClient, ch string) <-chan *redis.Message {
	t.Helper()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, ch)
	t.Cleanup(func() { _ = ps.Close() })
	_, err := ps.Receive(ctx) // the subscription confirmation
	require.NoError(t, err)
	return ps.Channel()
}

// nextEvent returns the next event on c, failing after 5s.
func nextEvent(t *testing.T, c <-chan *redis.Message) Event {
	t.Helper()
	select {
	case m := <-c:
		e, err := DecodeEvent([]byte(m.Payload))
		require.NoError(t, err)
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return Event{}
	}
}

// checkLobby verifies the lobby's invariants straight from Redis: every
// room has a record, no room holds more than capacity seats (capacity > 0),
// every seated user has a lease and every lease a seated user, and every
// seat is in a room that exists. It returns the number of rooms and of
// seats.
func checkLobby(t testing.TB, r *redistest.Redis, lobby string, capacity int) (rooms, seats int) {
	t.Helper()
	ctx := context.Background()
	ks := keyspace.New(r.Prefix)
	seqs, err := r.Client.ZRange(ctx, roomsKey(ks, lobby), 0, -1).Result()
	require.NoError(t, err)
	members, err := r.Client.ZRangeWithScores(ctx, membersKey(ks, lobby), 0, -1).Result()
	require.NoError(t, err)
	leases, err := r.Client.ZRange(ctx, leasesKey(ks, lobby), 0, -1).Result()
	require.NoError(t, err)
	perRoom := map[string]int{}
	seated := map[string]bool{}
	for _, m := range members {
		perRoom[strconv.Itoa(int(m.Score))]++
		seated[m.Member.(string)] = true
	}
	for i, seq := range seqs {
		assert.Equal(t, strconv.Itoa(i+1), seq, "rooms are numbered from 1 without gaps")
		assert.True(t, r.Client.HExists(ctx, recordsKey(ks, lobby), seq).Val(), "room %s has a record", seq)
		if capacity > 0 {
			assert.LessOrEqual(t, perRoom[seq], capacity, "room %s within capacity", seq)
		}
		seats += perRoom[seq]
		delete(perRoom, seq)
	}
	assert.Empty(t, perRoom, "seats in rooms that do not exist")
	assert.Len(t, leases, len(members), "one lease per seat")
	for _, u := range leases {
		assert.True(t, seated[u], "lease of %s without a seat", u)
	}
	return len(seqs), seats
}

// ws1 is the WebSocket attachment the tests that do not care about
// attachments join with.
var ws1 = Attach{ID: "ws1"}

// say sends with no rate limit and returns the message.
func (s *Service) say(ctx context.Context, roomID, user, text string) (Message, error) {
	r, err := s.Messages.Send(ctx, roomID, user, text, SendOptions{})
	return r.Message, err
}

// attsOf returns the attachments of users in room, id ws1 each.
func attsOf(room string, users ...string) []Attachment {
	out := make([]Attachment, len(users))
	for i, u := range users {
		out[i] = Attachment{Room: room, User: u, ID: ws1.ID}
	}
	return out
}

// sweep runs s's Sweep and returns the seats it reaped.
func sweep(t *testing.T, s *Service) int {
	t.Helper()
	n, err := s.Seats.Sweep(context.Background())
	require.NoError(t, err)
	return n
}

// membersOf returns the members of room as s reads them.
func membersOf(t *testing.T, s *Service, room string) []string {
	t.Helper()
	got, err := s.Seats.Room(context.Background(), room)
	require.NoError(t, err)
	return got.Members
}

// embeddedRedis starts the in-process server chatd runs on without --redis,
// whatever redistest would pick: the scripts must run on it too.
func embeddedRedis(t *testing.T) *redistest.Redis {
	t.Helper()
	e, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(e.Close)
	c := redis.NewClient(&redis.Options{Addr: e.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return &redistest.Redis{Client: c, Addrs: []string{e.Addr()}, Prefix: redistest.Prefix(t), Kind: redistest.Embedded}
}

// measuredCalls sums the calls of stats (commandStats), leaving out the
// INFO and CONFIG of the measurement itself.
func measuredCalls(stats map[string]int64) (calls float64) {
	for name, c := range stats {
		if name != "info" && !strings.HasPrefix(name, "config") {
			calls += float64(c)
		}
	}
	return calls
}

// commandStats reads INFO commandstats: each command's calls since the
// last CONFIG RESETSTAT ("config|resetstat" for a subcommand), a script's
// own commands included.
func commandStats(tb testing.TB, rdb redis.UniversalClient) map[string]int64 {
	tb.Helper()
	return redistest.CallsByCommand(tb, rdb)
}
