package direct_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dm "github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/direct"
)

// markLog records the users the use case marks dirty.
type markLog struct {
	mu    sync.Mutex
	users []string
}

func (m *markLog) User(user string, _ dirty.Mask) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.users = append(m.users, user)
}

func (m *markLog) take() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.users
	m.users = nil
	return out
}

// The rest of the node, which a send does not use here: no connections,
// nobody muted, the default length, no rate, no bus.
type (
	noClients   struct{}
	notMuted    struct{}
	plainLimits struct{}
	idleNode    struct{}
)

func (noClients) UserClients(string) []*realtime.Client               { return nil }
func (noClients) ReloadBlocks(context.Context)                        {}
func (notMuted) Muted(context.Context, string) error                  { return nil }
func (plainLimits) Int(string) int                                    { return dm.MaxText }
func (plainLimits) Float(string) float64                              { return 0 }
func (idleNode) Subscribe(context.Context, string, bus.Handler) error { return nil }
func (idleNode) Go(func(context.Context)) bool                        { return false }

// TestDirectSendRetriedByTheRedisClientIsTheClientsFirstSend: a keyed DM
// whose script go-redis sent twice (its first reply lost: a stalled
// Redis, a node paused while it waited) is the client's first send: the
// answer does not say repeated, and both users are marked dirty as for
// any new message; the client's own repeat of it says repeated. Before,
// the second copy answered as a repeat, so the marks were skipped and the
// client was told its first send was a repeat.
func TestDirectSendRetriedByTheRedisClientIsTheClientsFirstSend(t *testing.T) {
	t.Parallel()
	redistest.Each(t, []redistest.Backend{{Name: "single server", Start: redistest.Real}, {Name: "cluster", Start: redistest.Cluster}},
		func(t *testing.T, r *redistest.Redis) {
			ctx := context.Background()
			h := redistest.ResendScript("direct.message_send")
			h.Always(nil)
			rdb := h.Client(t, r)
			store := dm.New(rdb, dm.Config{Prefix: r.Prefix, Key: []byte("k")})
			marks := &markLog{}
			d, err := direct.New(direct.Config{Store: store, Clients: noClients{}, Marks: marks, Muted: notMuted{},
				Limits: plainLimits{}, Node: idleNode{}})
			require.NoError(t, err)
			alice := realtime.Principal{User: "Alice", Session: "s-alice"}
			conv, err := d.Open(ctx, alice, "bob")
			require.NoError(t, err)
			marks.take()

			for _, tc := range []struct{ text, ref string }{{"keyed", "r1"}, {"keyless", ""}} {
				sent, err := d.Send(ctx, alice, "bob", tc.text, tc.ref)
				require.NoError(t, err, tc.text)
				assert.False(t, sent.Repeated, "%s: the client's first send, not a repeat", tc.text)
				assert.ElementsMatch(t, []string{"Alice", "bob"}, marks.take(), "%s: both users marked", tc.text)
			}
			require.EqualValues(t, 4, h.Copies(), "each send's script was sent twice")

			again, err := d.Send(ctx, alice, "bob", "keyed", "r1")
			require.NoError(t, err)
			assert.True(t, again.Repeated, "the client sent it again")
			page, err := store.History(ctx, conv, "", 10)
			require.NoError(t, err)
			var texts []string
			for _, m := range page.Messages {
				texts = append(texts, m.Text)
			}
			assert.Equal(t, []string{"keyed", "keyless"}, texts, "each stored once")
		})
}
