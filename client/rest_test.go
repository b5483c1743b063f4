package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/chatdtest"
)

// The REST calls against a real node: sessions, rooms and messages,
// leaderboards, seen, shop and settings, and their documented errors as
// Go values.
func TestRESTFlows(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx := ctxT(t)
	adm := adminOf(t, cl)
	cfg := client.Config{BaseURL: cl.Nodes[0].URL}
	alice := newClient(t, "alice", cfg)
	bob := newClient(t, "bob", client.Config{BaseURL: cl.Nodes[1].URL})

	t.Run("sessions", func(t *testing.T) {
		other := newClient(t, "", cfg)
		err := other.SignIn(ctx, "alice")
		require.Error(t, err)
		assert.ErrorIs(t, err, client.ErrNameTaken)
		assert.True(t, errcode.Is(err, errcode.NameTaken))
		var e *client.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, http.StatusConflict, e.Status)
		assert.NotEmpty(t, e.Message)
		assert.False(t, errors.Is(err, client.ErrBanned))

		err = other.SignIn(ctx, "no spaces")
		assert.ErrorIs(t, err, client.ErrBadName)

		second, err := alice.NewSession(ctx)
		require.NoError(t, err)
		assert.Equal(t, "alice", second.User())
		assert.NotEqual(t, alice.Token(), second.Token())
		_, err = second.Wallet(ctx)
		require.NoError(t, err)

		_, err = newClient(t, "", cfg).Wallet(ctx)
		assert.ErrorIs(t, err, client.ErrBadToken, "no token")
		_, err = alice.Nodes(ctx)
		assert.ErrorIs(t, err, client.ErrForbidden, "a user token on an admin endpoint")
		nodes, err := adm.Nodes(ctx)
		require.NoError(t, err)
		assert.Len(t, nodes, 2)
		for _, n := range nodes {
			require.NotNil(t, n.StartedAt, "%s says when it started", n.ID)
			assert.Positive(t, n.Goroutines, n.ID)
			assert.Positive(t, n.MemoryBytes, n.ID)
		}
	})

	t.Run("rooms and messages", func(t *testing.T) {
		room, err := alice.Join(ctx, "lounge")
		require.NoError(t, err)
		assert.Equal(t, "lounge-1", room.ID)
		_, err = bob.Join(ctx, "lounge")
		require.NoError(t, err)
		m1, err := alice.Post(ctx, room.ID, "one")
		require.NoError(t, err)
		assert.Equal(t, "alice", m1.From)
		m2, err := bob.Post(ctx, room.ID, "two")
		require.NoError(t, err)
		assert.Greater(t, m2.ID, m1.ID)

		hist, err := alice.History(ctx, room.ID, client.HistoryOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{m1.ID, m2.ID}, ids(hist))
		after, err := alice.History(ctx, room.ID, client.HistoryOptions{After: m1.ID})
		require.NoError(t, err)
		assert.Equal(t, []string{m2.ID}, ids(after))
		_, err = alice.History(ctx, room.ID, client.HistoryOptions{After: "1-1"})
		assert.ErrorIs(t, err, client.ErrResumeGap)

		unread, err := bob.Unread(ctx)
		require.NoError(t, err)
		assert.Equal(t, 2, unread[room.ID])
		require.NoError(t, bob.MarkRead(ctx, room.ID, m2.ID))
		unread, err = bob.Unread(ctx)
		require.NoError(t, err)
		assert.Equal(t, 0, unread[room.ID])

		got, err := adm.Room(ctx, room.ID)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"alice", "bob"}, got.Members)
		rs, err := alice.Rooms(ctx, "lounge")
		require.NoError(t, err)
		require.Len(t, rs, 1)
		_, err = alice.Room(ctx, "lounge-99")
		assert.ErrorIs(t, err, client.ErrUnknownRoom)
		require.Eventually(t, func() bool {
			ls, err := alice.Lobbies(ctx, 10)
			return err == nil && len(ls) > 0 && ls[0].Lobby == "lounge" && ls[0].Online == 2
		}, wait, 50*time.Millisecond, "the lobby index")
		// a REST session is online by its polls
		_, err = alice.PollOnce(ctx, 0)
		require.NoError(t, err)
		p, err := bob.Presence(ctx, "alice")
		require.NoError(t, err)
		assert.True(t, p.Online)
		assert.Contains(t, p.Rooms, room.ID)
		st, err := alice.Stats(ctx)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, st.MessagesTotal, int64(2))

		require.NoError(t, alice.Leave(ctx, room.ID))
		_, err = alice.Post(ctx, room.ID, "gone")
		assert.ErrorIs(t, err, client.ErrNotSeated)
		require.NoError(t, adm.RemoveMessage(ctx, room.ID, m1.ID))
		err = adm.RemoveMessage(ctx, room.ID, m1.ID)
		assert.ErrorIs(t, err, client.ErrUnknownMessage)
	})

	t.Run("leaderboards", func(t *testing.T) {
		for _, s := range []client.Score{{Player: "p1", Score: 10}, {Player: "p2", Score: 30}, {Player: "p3", Score: 20}} {
			_, err := alice.PostScore(ctx, "arena", s)
			require.NoError(t, err)
		}
		e, err := alice.PostScore(ctx, "arena", client.Score{Player: "p1", Score: 15, Mode: client.ScoreIncr})
		require.NoError(t, err)
		assert.Equal(t, client.Entry{Player: "p1", Score: 25, Rank: 1}, e)
		top, err := bob.Top(ctx, "arena", 2)
		require.NoError(t, err)
		assert.Equal(t, []client.Entry{{"p2", 30, 0}, {"p1", 25, 1}}, top)
		e, err = bob.Player(ctx, "arena", "p3")
		require.NoError(t, err)
		assert.Equal(t, int64(2), e.Rank)
		_, err = bob.Player(ctx, "arena", "nobody")
		assert.ErrorIs(t, err, client.ErrUnknownPlayer)
		around, err := bob.Around(ctx, "arena", "p1", 1)
		require.NoError(t, err)
		assert.Equal(t, []string{"p2", "p1", "p3"}, players(around))
		lo, hi := 20.0, 25.0
		rng, err := bob.Range(ctx, "arena", client.RangeOptions{Min: &lo, Max: &hi})
		require.NoError(t, err)
		assert.Equal(t, []string{"p1", "p3"}, players(rng))
		ranks, err := bob.Ranks(ctx, "arena", []string{"p3", "nobody"})
		require.NoError(t, err)
		assert.Equal(t, []client.Entry{{"p3", 20, 2}, {"nobody", 0, -1}}, ranks)
		_, err = alice.PostScore(ctx, "arena", client.Score{Player: "p1", Score: 1, Mode: "double"})
		assert.ErrorIs(t, err, client.ErrBadValue)
	})

	t.Run("seen", func(t *testing.T) {
		require.NoError(t, alice.MarkSeen(ctx, []string{"a", "b"}))
		unseen, err := alice.Unseen(ctx, []string{"a", "c", "b", "d"})
		require.NoError(t, err)
		assert.Equal(t, []string{"c", "d"}, unseen)
	})

	t.Run("shop", func(t *testing.T) {
		require.NoError(t, adm.StockItem(ctx, client.Item{Item: "sword", Stock: 2, Price: 100}))
		bal, err := adm.Grant(ctx, "bob", 250)
		require.NoError(t, err)
		assert.Equal(t, int64(250), bal)
		// a keyed grant twice grants once and answers the first balance
		for range 2 {
			bal, err = adm.Grant(ctx, "dan", 30, client.WithIdempotencyKey("grant-7"))
			require.NoError(t, err)
			assert.Equal(t, int64(30), bal)
		}
		_, err = adm.Grant(ctx, "dan", 31, client.WithIdempotencyKey("grant-7"))
		assert.ErrorIs(t, err, client.ErrBadRequest, "the key of another amount")
		items, err := bob.Items(ctx)
		require.NoError(t, err)
		assert.Contains(t, items, client.Item{Item: "sword", Stock: 2, Price: 100})

		// the same key twice buys once and answers the stored wallet
		w1, err := bob.Buy(ctx, "sword", 1, client.WithIdempotencyKey("order-1"))
		require.NoError(t, err)
		assert.Equal(t, client.Wallet{Balance: 150, Items: map[string]int64{"sword": 1}}, w1)
		w2, err := bob.Buy(ctx, "sword", 1, client.WithIdempotencyKey("order-1"))
		require.NoError(t, err)
		assert.Equal(t, w1, w2)
		_, err = bob.Buy(ctx, "sword", 2, client.WithIdempotencyKey("order-1"))
		assert.ErrorIs(t, err, client.ErrBadRequest, "the key of another purchase")

		_, err = bob.Buy(ctx, "sword", 1)
		require.NoError(t, err)
		_, err = bob.Buy(ctx, "sword", 1)
		assert.ErrorIs(t, err, client.ErrSoldOut)
		require.NoError(t, adm.StockItem(ctx, client.Item{Item: "sword", Stock: 5, Price: 100}))
		_, err = bob.Buy(ctx, "sword", 1)
		assert.ErrorIs(t, err, client.ErrInsufficientFunds)
		_, err = bob.Buy(ctx, "shield", 1)
		assert.ErrorIs(t, err, client.ErrUnknownItem)
		w, err := bob.Wallet(ctx)
		require.NoError(t, err)
		assert.Equal(t, client.Wallet{Balance: 50, Items: map[string]int64{"sword": 2}}, w)
	})

	t.Run("settings", func(t *testing.T) {
		defs, err := alice.SettingDefs(ctx)
		require.NoError(t, err)
		require.NotEmpty(t, defs)
		assert.Equal(t, "room.capacity", defs[0].Key)
		v, err := adm.SetSetting(ctx, "motd", "welcome")
		require.NoError(t, err)
		s, err := alice.Settings(ctx)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, s.Version, v)
		assert.Equal(t, "welcome", s.Values["motd"])
		_, err = adm.SetSetting(ctx, "room.capacity", 0)
		assert.ErrorIs(t, err, client.ErrBadValue)
		_, err = adm.SetSetting(ctx, "no.such", 1)
		assert.ErrorIs(t, err, client.ErrUnknownSetting)
		_, err = adm.ResetSetting(ctx, "motd")
		require.NoError(t, err)
	})

	t.Run("sign out", func(t *testing.T) {
		carol := newClient(t, "carol", cfg)
		second, err := carol.NewSession(ctx)
		require.NoError(t, err)
		require.NoError(t, carol.SignOut(ctx))
		for _, c := range []*client.Client{carol, second} {
			_, err := c.Wallet(ctx)
			assert.ErrorIs(t, err, client.ErrBadToken)
		}
		// the name is free at once
		newClient(t, "carol", cfg)
	})
}

func players(es []client.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Player
	}
	return out
}

// The poll loop of a REST client sees a message posted on another node
// and a wallet grant, and stops with its context.
func TestPollLoopSeesMessageAndWallet(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx := ctxT(t)
	adm := adminOf(t, cl)
	carol := newClient(t, "carol", client.Config{BaseURL: cl.Nodes[0].URL})
	dave := newClient(t, "dave", client.Config{BaseURL: cl.Nodes[1].URL})
	room, err := carol.Join(ctx, "poll")
	require.NoError(t, err)
	_, err = dave.Join(ctx, "poll")
	require.NoError(t, err)

	results := make(chan *client.PollResult, 100)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- carol.Poll(pctx, client.PollOptions{Wait: 5 * time.Second}, func(_ context.Context, r *client.PollResult) error {
			results <- r
			return nil
		})
	}()
	first := <-results
	assert.True(t, first.Has(client.SectionRooms), "a new session's first poll has every section: %v", first.Dirty)
	assert.True(t, first.Has(client.SectionWallet))

	msg, err := dave.Post(ctx, room.ID, "for carol")
	require.NoError(t, err)
	_, err = adm.Grant(ctx, "carol", 100)
	require.NoError(t, err)
	var sawMsg, sawWallet bool
	deadline := time.After(wait)
	for !sawMsg || !sawWallet {
		select {
		case r := <-results:
			for _, m := range r.Messages[room.ID] {
				if m.ID == msg.ID {
					sawMsg = true
					assert.Equal(t, "for carol", m.Text)
				}
			}
			if r.Wallet != nil && r.Wallet.Balance == 100 {
				sawWallet = true
			}
		case <-deadline:
			t.Fatalf("poll: message seen %v, wallet seen %v", sawMsg, sawWallet)
		}
	}
	stop()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(wait):
		t.Fatal("Poll did not stop with its context")
	}
}
