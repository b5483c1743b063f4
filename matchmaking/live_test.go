package matchmaking_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/settings"
)

// TestQueuesFollowTheLiveSetting: the queues are the live setting
// matchmaking.queues, read through each node's settings.Store; a write is
// validated by the registry with the queue parser, and a node that reloads
// sees the new queues at its next call.
func TestQueuesFollowTheLiveSetting(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	var nodes []*matchmaking.Service
	var stores []*settings.Store
	for range 2 {
		rdb := r.NewClient(t)
		st := settings.New(rdb, settings.Config{Prefix: r.Prefix})
		stores = append(stores, st)
		nodes = append(nodes, matchmaking.New(rdb, matchmaking.Config{Prefix: r.Prefix,
			Queues: func() string { return st.String(settings.MatchmakingQueues) }}))
	}
	names := func(s *matchmaking.Service) []string {
		var out []string
		for _, q := range s.Queues() {
			out = append(out, q.Name)
		}
		return out
	}
	assert.Equal(t, []string{"quick"}, names(nodes[0]), "the default defines one queue")

	raw := `{"duel":{"min":2,"max":2,"window":100,"widen_per_second":10,"max_wait_seconds":60,"max_party":2,"reserve_seconds":30}}`
	_, err := stores[0].Set(ctx, settings.MatchmakingQueues, json.RawMessage(strconv.Quote(raw)))
	require.NoError(t, err)
	assert.Equal(t, []string{"duel"}, names(nodes[0]), "the writing node at once")
	require.NoError(t, stores[1].Reload(ctx))
	assert.Equal(t, []string{"duel"}, names(nodes[1]), "another node once its store has the change")
	_, err = nodes[1].Submit(ctx, "duel", matchmaking.Ticket{User: "al"})
	require.NoError(t, err)
	_, err = nodes[1].Submit(ctx, "quick", matchmaking.Ticket{User: "bo"})
	assert.ErrorIs(t, err, matchmaking.ErrUnknownQueue)

	_, err = stores[0].Set(ctx, settings.MatchmakingQueues, json.RawMessage(strconv.Quote(`{"duel":{"min":3,"max":2,"window":1}}`)))
	require.ErrorIs(t, err, settings.ErrBadValue)
	assert.EqualError(t, err, `settings: matchmaking.queues: queue "duel": max 2 is below min 3`)
	assert.Equal(t, []string{"duel"}, names(nodes[0]), "a refused write changes nothing")
}
