package match_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/match"
	"github.com/chatd/chatd/realtime/realtimetest"
	"github.com/chatd/chatd/rooms"
)

// setQueues defines the matchmaking queues through the live setting, on
// every node (they hear the write over pub/sub).
func setQueues(t testing.TB, n *realtimetest.Node, defs, want string, nodes ...*realtimetest.Node) {
	t.Helper()
	_, err := n.Services.Settings.Set(context.Background(), "matchmaking.queues", json.RawMessage(mustJSON(defs)))
	require.NoError(t, err)
	for _, o := range append(nodes, n) {
		require.Eventually(t, func() bool {
			_, err := o.Match.Service().Queue(want)
			return err == nil
		}, 20*time.Second, 10*time.Millisecond, "node %s sees the queue", o.ID)
	}
}

// pollMatch polls p until its match section holds an event of type typ,
// and returns it.
func pollMatch(t testing.TB, n *realtimetest.Node, p realtime.Principal, typ string) matchmaking.Event {
	t.Helper()
	var got matchmaking.Event
	require.Eventually(t, func() bool {
		res, err := n.Polls.Poll(context.Background(), p, 0)
		if err != nil {
			return false
		}
		evs, _ := res.Data["match"].([]matchmaking.Event)
		for _, ev := range evs {
			if ev.Type == typ {
				got = ev
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "%s's poll shows %s", p.User, typ)
	return got
}

func TestAMatchOfWebSocketAndRESTPlayersOnThreeNodesMeetsInItsRoom(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2, n3 := startNode(t, r, "n1"), startNode(t, r, "n2"), startNode(t, r, "n3")
	setQueues(t, n1, `{"trio":{"min":3,"max":3,"window":1000,"reserve_seconds":60}}`, "trio", n2, n3)
	ctx := context.Background()

	ann, fa := n1.Connect(t, "ann")
	_, faOther := n3.Connect(t, "ann") // a second connection of ann's, on another node
	bob, fb := n2.Connect(t, "bob")
	cy := realtime.Principal{User: "cy", Session: "rest-cy"}
	_, err := n3.Polls.Poll(ctx, cy, 0) // a clean start: the session's first poll has every section
	require.NoError(t, err)

	ta, err := n1.Match.Submit(ctx, ann.Principal(), "trio", match.TicketRequest{Skill: 100})
	require.NoError(t, err)
	assert.Equal(t, matchmaking.Waiting, ta.State)
	_, err = n2.Match.Submit(ctx, bob.Principal(), "trio", match.TicketRequest{Skill: 110})
	require.NoError(t, err)
	tc, err := n3.Match.Submit(ctx, cy, "trio", match.TicketRequest{Skill: 90})
	require.NoError(t, err)

	ev := fa.First(t, "matched", nil)
	room, _ := ev["room"].(string)
	require.NotEmpty(t, room)
	assert.ElementsMatch(t, []any{"ann", "bob", "cy"}, ev["players"])
	assert.Equal(t, ta.Ticket.ID, ev["ticket"])
	assert.EqualValues(t, 60, ev["reserve_seconds"])
	assert.Equal(t, room, faOther.First(t, "matched", nil)["room"], "every connection of the user, on every node")
	assert.Equal(t, room, fb.First(t, "matched", nil)["room"])
	pev := pollMatch(t, n3, cy, matchmaking.EventMatched)
	assert.Equal(t, room, pev.Room)
	assert.Equal(t, tc.Ticket.ID, pev.Ticket)

	t.Run("the status says matched, with the room's match", func(t *testing.T) {
		st, err := n2.Match.Status(ctx, cy, "trio", tc.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, matchmaking.Matched, st.State)
		require.NotNil(t, st.Match)
		assert.Equal(t, room, n2.Match.Room(*st.Match))
		_, err = n2.Match.Status(ctx, bob.Principal(), "trio", tc.Ticket.ID)
		assert.ErrorIs(t, err, matchmaking.ErrUnknownTicket, "another user's ticket is not shown")
	})

	t.Run("the players join the room by its id and chat there", func(t *testing.T) {
		require.NoError(t, n1.Chat.Resume(ctx, ann, room, ""))
		fa.First(t, "joined", func(m map[string]any) bool { return m["room"].(map[string]any)["id"] == room })
		require.NoError(t, n2.Chat.Resume(ctx, bob, room, ""))
		fb.First(t, "joined", func(m map[string]any) bool { return m["room"].(map[string]any)["id"] == room })
		_, err := n3.REST.JoinRoomREST(ctx, cy, room)
		require.NoError(t, err)
		id := n1.Say(t, ann, fa, room, "glhf", "m1")
		fb.Wait(t, "ann's message", func([]map[string]any) bool { return len(fb.Messages(room)) == 1 })
		assert.Equal(t, []string{id}, fb.Messages(room))
		_, err = n3.REST.Post(ctx, cy, room, "gg", "")
		require.NoError(t, err)
		fa.Wait(t, "cy's message", func([]map[string]any) bool { return len(fa.Messages(room)) == 2 })
	})

	t.Run("nobody else gets in", func(t *testing.T) {
		eve, fe := n1.Connect(t, "eve")
		err := n1.Chat.Resume(ctx, eve, room, "")
		assert.ErrorIs(t, err, rooms.ErrUnknownRoom, "as a room that does not exist")
		lobby, _, _ := rooms.ParseRoom(room)
		err = n1.Chat.Join(ctx, eve, lobby)
		assert.Equal(t, errcode.Forbidden, errcode.Of(err))
		assert.Empty(t, fe.Messages(room))
	})
}

func TestAPartyStaysTogether(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	setQueues(t, n1, `{"team":{"min":3,"max":3,"window":1000,"max_party":2}}`, "team", n2)
	ctx := context.Background()
	ann, fa := n1.Connect(t, "ann")
	bob, fb := n2.Connect(t, "bob")
	cy, fc := n2.Connect(t, "cy")
	dan, fd := n1.Connect(t, "dan")

	t.Run("a party too large is refused before any presence read", func(t *testing.T) {
		_, err := n1.Match.Invite(ctx, ann.Principal(), "team", match.TicketRequest{Skill: 1, Party: []string{"bob", "cy"}})
		assert.ErrorIs(t, err, matchmaking.ErrBadTicket)
	})
	t.Run("a party member who is not online is refused", func(t *testing.T) {
		_, err := n1.Match.Invite(ctx, ann.Principal(), "team", match.TicketRequest{Skill: 1, Party: []string{"zed"}})
		assert.ErrorIs(t, err, realtime.ErrPartyOffline)
	})
	require.Eventually(t, func() bool {
		st, err := n1.Services.Presence.Get(ctx, "bob")
		return err == nil && st.Online
	}, 20*time.Second, 10*time.Millisecond)
	// cy and dan wait first and are closest in skill: a matcher that split
	// parties would pair them with ann alone.
	_, err := n2.Match.Submit(ctx, cy.Principal(), "team", match.TicketRequest{Skill: 500})
	require.NoError(t, err)
	_, err = n1.Match.Submit(ctx, dan.Principal(), "team", match.TicketRequest{Skill: 501})
	require.NoError(t, err)
	party, err := n1.Match.Invite(ctx, ann.Principal(), "team", match.TicketRequest{Skill: 502, Party: []string{"bob"}})
	require.NoError(t, err)
	_, err = n2.Match.Accept(ctx, bob.Principal(), "team", party.Ticket.ID)
	require.NoError(t, err)

	ea, eb := fa.First(t, "matched", nil), fb.First(t, "matched", nil)
	assert.Equal(t, ea["room"], eb["room"], "the party is in one match")
	assert.Equal(t, party.Ticket.ID, eb["ticket"], "a party shares its ticket")
	players, _ := ea["players"].([]any)
	assert.Len(t, players, 3)
	assert.Contains(t, players, "ann")
	assert.Contains(t, players, "bob")
	// exactly one of cy and dan is in it; the other still waits
	var gotC, gotD bool
	require.Eventually(t, func() bool {
		gotC, gotD = hasType(fc.All(), "matched"), hasType(fd.All(), "matched")
		return gotC || gotD
	}, 20*time.Second, 10*time.Millisecond)
	assert.NotEqual(t, gotC, gotD, "one solo player joins the party")
}

func hasType(fs []map[string]any, typ string) bool {
	for _, m := range fs {
		if m["type"] == typ {
			return true
		}
	}
	return false
}

func TestCancelAndExpiryAreReportedAndAnUnclaimedSeatIsReleased(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	setQueues(t, n1, `{"slow":{"min":2,"max":2,"window":0,"max_wait_seconds":1},`+
		`"duo":{"min":2,"max":2,"window":1000,"reserve_seconds":1}}`, "duo", n2)
	ctx := context.Background()
	ann, fa := n1.Connect(t, "ann")
	rita := realtime.Principal{User: "rita", Session: "rest-rita"}

	t.Run("a cancel answers cancelled; only a player may cancel", func(t *testing.T) {
		st, err := n1.Match.Submit(ctx, ann.Principal(), "duo", match.TicketRequest{Skill: 1})
		require.NoError(t, err)
		_, err = n2.Match.Cancel(ctx, rita, "duo", st.Ticket.ID)
		assert.ErrorIs(t, err, matchmaking.ErrUnknownTicket)
		got, err := n2.Match.Cancel(ctx, ann.Principal(), "duo", st.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, matchmaking.Cancelled, got.State)
		got, err = n1.Match.Status(ctx, ann.Principal(), "duo", st.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, matchmaking.Cancelled, got.State)
		_, err = n1.Match.Submit(ctx, ann.Principal(), "nope", match.TicketRequest{})
		assert.ErrorIs(t, err, matchmaking.ErrUnknownQueue)
	})

	t.Run("an expired ticket is an event and a poll section", func(t *testing.T) {
		sa, err := n1.Match.Submit(ctx, ann.Principal(), "slow", match.TicketRequest{Skill: 1})
		require.NoError(t, err)
		sr, err := n2.Match.Submit(ctx, rita, "slow", match.TicketRequest{Skill: 999}) // window 0: never matched
		require.NoError(t, err)
		ev := fa.First(t, "ticket_expired", nil)
		assert.Equal(t, sa.Ticket.ID, ev["ticket"])
		pev := pollMatch(t, n2, rita, matchmaking.EventExpired)
		assert.Equal(t, sr.Ticket.ID, pev.Ticket)
		st, err := n2.Match.Status(ctx, rita, "slow", sr.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, matchmaking.Expired, st.State)
	})

	t.Run("a seat nobody claims is released after its reservation", func(t *testing.T) {
		_, err := n1.Match.Submit(ctx, ann.Principal(), "duo", match.TicketRequest{Skill: 1})
		require.NoError(t, err)
		_, err = n2.Match.Submit(ctx, rita, "duo", match.TicketRequest{Skill: 2})
		require.NoError(t, err)
		room, _ := fa.First(t, "matched", nil)["room"].(string)
		require.NoError(t, n1.Chat.Resume(ctx, ann, room, ""))
		fa.First(t, "joined", func(m map[string]any) bool { return m["room"].(map[string]any)["id"] == room })
		// rita never comes: her seat goes ("left") once the second passed
		fa.First(t, "presence", func(m map[string]any) bool {
			return m["room"] == room && m["user"] == "rita" && m["state"] == "left"
		})
		got, err := n2.Reads.Room(ctx, room)
		require.NoError(t, err)
		assert.Equal(t, []string{"ann"}, got.Members)
		_, err = n2.REST.JoinRoomREST(ctx, realtime.Principal{User: "eve", Session: "rest-eve"}, room)
		assert.ErrorIs(t, err, rooms.ErrUnknownRoom, "a released seat is no seat for a stranger, and no hint of the room")
	})
}

func TestTheHooksAreIdempotent(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n := startNode(t, r, "n1")
	setQueues(t, n, `{"pair":{"min":2,"max":2,"window":10,"max_wait_seconds":5}}`, "pair")
	ctx := context.Background()
	m := matchmaking.Match{ID: "pair-41", Queue: "pair", Seq: 41, Created: time.UnixMilli(5_000), Players: []string{"ann", "bob"},
		Tickets: []matchmaking.Ticket{{ID: "TA", Queue: "pair", User: "ann"}, {ID: "TB", Queue: "pair", User: "bob"}}}
	_, fa := n.Connect(t, "ann")
	require.NoError(t, n.Match.Matched(ctx, m))
	require.NoError(t, n.Match.Matched(ctx, m), "a hook run again (a holder died before its ack)")
	room, err := n.Reads.Room(ctx, n.Match.Room(m))
	require.NoError(t, err)
	assert.Equal(t, []string{"ann", "bob"}, room.Members)
	x := matchmaking.Ticket{ID: "TX", Queue: "pair", User: "cy", Created: time.UnixMilli(9_000)}
	require.NoError(t, n.Match.Expired(ctx, x))
	require.NoError(t, n.Match.Expired(ctx, x))
	// A notice after them on the same channel: once ann has it, she has
	// every earlier one. The hook that ran twice reached her once.
	fence := matchmaking.Ticket{ID: "TF", Queue: "pair", User: "ann", Created: time.UnixMilli(10_000)}
	require.NoError(t, n.Match.Expired(ctx, fence))
	fa.First(t, "ticket_expired", func(e map[string]any) bool { return e["ticket"] == "TF" })
	matched := 0
	for _, e := range fa.All() {
		if e["type"] == "matched" {
			matched++
		}
	}
	assert.Equal(t, 1, matched, "ann's connection is told of the match once")
	for user, want := range map[string][]string{"ann": {matchmaking.EventExpired, matchmaking.EventMatched}, "cy": {matchmaking.EventExpired}} {
		evs, err := n.Match.Events(ctx, user)
		require.NoError(t, err)
		var got []string
		for _, e := range evs {
			got = append(got, e.Type)
		}
		assert.Equal(t, want, got, "%s is told once of each, newest first", user)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
