package chat_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/realtime"
)

// TestPresenceTickRenewsEveryGuestsName: the presence tick renews the
// name of every guest connected to the node (identity's AdmitMany: one
// pipeline for all of them, see identity.TestAdmitMany) and closes, with
// CloseSessionEnded, the connections of a guest whose name another holder
// has now; the others stay open.
func TestPresenceTickRenewsEveryGuestsName(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n := startNode(t, r, "n1")
	// claimed elsewhere: this node has confirmed nothing, so it asks Redis
	other := identity.New(r.Client, identity.Config{Prefix: r.Prefix})
	const guests = 100
	type conn struct {
		c *realtime.Client
		f *testkit.Transport
	}
	var cs []conn
	for i := range guests {
		user := fmt.Sprintf("guest%d", i)
		require.NoError(t, other.Claim(ctx, user, "h"+user))
		c, f := n.ConnectAs(t, realtime.Principal{User: user, Session: "s-" + user, Holder: "h" + user, Expires: time.Now().Add(time.Hour)})
		cs = append(cs, conn{c, f})
	}
	claim := func(user string) string { return keyspace.New(r.Prefix).Key("user", user, "claim") }
	require.NoError(t, r.Client.Set(ctx, claim("guest7"), "hsomeoneelse", time.Hour).Err(), "another holder has guest7's name")
	for i := range guests {
		require.NoError(t, r.Client.PExpire(ctx, claim(fmt.Sprintf("guest%d", i)), time.Minute).Err())
	}

	n.Chat.TouchPresence(ctx)
	code, _ := cs[7].f.Closed(t)
	assert.Equal(t, realtime.CloseSessionEnded, code)
	for i, c := range cs {
		if i == 7 {
			continue
		}
		select {
		case <-c.c.Finished():
			t.Fatalf("guest%d's connection was closed", i)
		default:
		}
		ttl, err := r.Client.PTTL(ctx, claim(fmt.Sprintf("guest%d", i))).Result()
		require.NoError(t, err)
		require.Greater(t, ttl, time.Minute, "guest%d's name renewed", i)
	}
}
