package sessions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/chat"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/realtime/sessions"
)

// startNode starts a node (realtimetest: composed as chatd composes it)
// and returns it, its Sessions and the Chat that gives connection
// leases back to them.
func startNode(t testing.TB, r *redistest.Redis) (*realtimetest.Node, *sessions.Sessions, *chat.Chat) {
	t.Helper()
	n := realtimetest.StartNode(t, r, "n1")
	return n, n.Sessions, n.Chat
}

func TestSignOutClosesTheGuestsConnections(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	_, s, ch := startNode(t, r)
	ctx := context.Background()
	holder, err := s.SignIn(ctx, "127.0.0.1", "gus", nil)
	require.NoError(t, err)
	p := realtime.Principal{User: "gus", Session: "s1", Holder: holder, Expires: time.Now().Add(time.Hour)}
	f := testkit.NewTransport()
	_, err = ch.Connect(p, "", f)
	require.NoError(t, err)
	_, err = s.SignIn(ctx, "127.0.0.1", "gus", nil)
	assert.ErrorIs(t, err, realtime.ErrNameTaken, "the name is held")
	require.NoError(t, s.SignOut(ctx, p))
	code, _ := f.Closed(t)
	assert.Equal(t, realtime.CloseSessionEnded, code)
	err = s.Admit(ctx, p)
	assert.ErrorIs(t, err, identity.ErrSignedOut)
	assert.Equal(t, errcode.BadToken, errcode.Of(err))
	_, err = s.SignIn(ctx, "127.0.0.1", "gus", nil)
	assert.NoError(t, err, "the name is free again")
}

// TestABannedUserIsNotAdmitted: a ban refuses the user's session checks.
func TestABannedUserIsNotAdmitted(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n, s, _ := startNode(t, r)
	_, err := n.Services.Moderation.Ban(context.Background(), "bart", time.Minute, "")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return errcode.Of(s.Admit(context.Background(), realtime.Principal{User: "bart", Session: "s"})) == errcode.Of(realtime.ErrBanned)
	}, 10*time.Second, 20*time.Millisecond)
	assert.ErrorIs(t, s.Admit(context.Background(), realtime.Principal{User: "bart", Session: "s"}), realtime.ErrBanned)
}

// TestConnectionLeasesNeedNoRenewalWhileTheirRunBeats: the connection ids
// Sessions gives carry the run the heartbeat reports live, so package
// identity counts their leases without renewal (ConnsConfig.Live): past
// their lease's end they still hold the address's cap, and the node's
// renewal loop sends nothing per connection.
func TestConnectionLeasesNeedNoRenewalWhileTheirRunBeats(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n, s, _ := startNode(t, r)
	_, err := n.Services.Settings.Set(ctx, "limit.connections_per_ip", []byte("2"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return n.Core.LiveRuns() }, 15*time.Second, 20*time.Millisecond, "a heartbeat answered")
	const addr = "203.0.113.9"
	var ids []string
	for range 2 {
		id, err := s.AdmitConn(ctx, addr)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	for _, id := range ids {
		run := id[:strings.LastIndexByte(id, '-')]
		assert.Equal(t, realtime.ConnRun(n.Core.RunID()), run, "the id's run (before its last '-') is this node's live run")
	}
	// End both leases in Redis, as if an hour passed without renewal.
	key := "*{ip:*}:conns"
	keys, err := r.Client.Keys(ctx, r.Prefix+key).Result()
	require.NoError(t, err)
	require.Len(t, keys, 1)
	for _, id := range ids {
		require.NoError(t, r.Client.ZAdd(ctx, keys[0], redis.Z{Score: 1, Member: id}).Err())
	}
	_, err = s.AdmitConn(ctx, addr)
	assert.ErrorIs(t, err, realtime.ErrTooManyFromAddr, "leases of a live run count past their end")
	s.RenewConns(ctx)
	scores, err := r.Client.ZMScore(ctx, keys[0], ids...).Result()
	require.NoError(t, err)
	assert.Equal(t, []float64{1, 1}, scores, "nothing renewed them")
}
