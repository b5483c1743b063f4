package chat_test

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/realtime"
)

// calledFrom reports whether fn (a function name suffix such as
// "(*Chat).touchUser") is on the calling goroutine's stack.
func calledFrom(fn string) bool {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// TestAGuestWhoLeavesDuringItsPresenceWriteKeepsGuestRetention: a guest
// whose connection ends while a presence write of it is under way (its
// connect's "online at once", a join, the presence tick) leaves a record
// kept realtime.GuestTTL, not the 30 days of a registered user's. The
// write decided who was here from one look at the hub and whether the
// user was a guest from a second: a disconnect between the two wrote the
// claim unmarked (30 days), and the disconnect's Offline then kept the
// record 30 days too (CI's abuse test: 719 h on a few of 108 guests). The
// node's clock, which each write reads between the two looks, ends the
// connection there, every time.
func TestAGuestWhoLeavesDuringItsPresenceWriteKeepsGuestRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, path := range []string{"(*Chat).touchUser", "(*keeper).localPresence"} {
		t.Run(path, func(t *testing.T) {
			r := redistest.Real(t)
			var hook atomic.Pointer[func()]
			now := func() time.Time {
				if f := hook.Load(); f != nil && calledFrom(path) && hook.CompareAndSwap(f, nil) {
					(*f)()
				}
				return time.Now()
			}
			n := startNode(t, r, "n1", func(c *realtime.Config) { c.Now = now })
			require.Eventually(t, func() bool { return n.Core.LiveRuns() }, 15*time.Second, 20*time.Millisecond, "a heartbeat answered")
			user := "gus" + strings.NewReplacer("(", "", ")", "", "*", "", ".", "").Replace(path)
			f := testkit.NewTransport()
			c, err := n.Chat.Connect(realtime.Principal{User: user, Session: "s-" + user, Holder: "h-" + user}, "", f)
			require.NoError(t, err)
			f.First(t, "hello", nil)
			require.Eventually(t, func() bool {
				st, err := n.Services.Presence.Get(ctx, user)
				return err == nil && st.Online
			}, 10*time.Second, 20*time.Millisecond, "online at once, as a guest")

			// The connection ends as the write looks at the hub: Disconnect
			// takes it out of the hub, then waits for the write to finish
			// before writing the user offline.
			disconnected := make(chan struct{})
			leave := func() {
				go func() {
					defer close(disconnected)
					n.Chat.Disconnect(ctx, c)
				}()
				for len(n.Core.Hub().UserClients(user)) > 0 {
					time.Sleep(time.Millisecond)
				}
			}
			hook.Store(&leave)
			if path == "(*Chat).touchUser" {
				n.Chat.TouchUser(ctx, user) // as a join or the connect's first write does
			} else {
				n.Core.MarkFresh() // the next tick writes every user
			}
			select {
			case <-disconnected:
			case <-time.After(30 * time.Second):
				t.Fatal("the connection did not end within 30 s")
			}
			st, err := n.Services.Presence.Get(ctx, user)
			require.NoError(t, err)
			require.False(t, st.Online, "offline after the disconnect")
			key := keyspace.New(r.Prefix).Key("user", names.Canonical(user), "presence")
			ttl, err := r.Client.PTTL(ctx, key).Result()
			require.NoError(t, err)
			assert.Greater(t, ttl, time.Duration(0), "the record has a TTL")
			assert.LessOrEqual(t, ttl, realtime.GuestTTL, "a guest's record is kept GuestTTL, not 30 days")
		})
	}
}
