package match_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/match"
)

// TestNobodyIsQueuedWithoutConsent: #40's third reproduction. Naming an
// online user in a party queued them, blocked their own submission with
// ticket_open and matched them with the attacker. Now a party is an
// invitation: it queues nobody until every invitee accepted.
func TestNobodyIsQueuedWithoutConsent(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2 := startNode(t, r, "n1"), startNode(t, r, "n2")
	setQueues(t, n1, `{"duel":{"min":2,"max":2,"window":1e9,"max_party":2,"reserve_seconds":60}}`, "duel", n2)
	ctx := context.Background()
	mal, fm := n1.Connect(t, "mallory")
	vic, fv := n2.Connect(t, "Victim")
	require.Eventually(t, func() bool {
		st, err := n1.Services.Presence.Get(ctx, "victim")
		return err == nil && st.Online
	}, 20*time.Second, 10*time.Millisecond)

	t.Run("a ticket naming a party is refused", func(t *testing.T) {
		_, err := n1.Match.Submit(ctx, mal.Principal(), "duel", match.TicketRequest{Skill: 1, Party: []string{"victim"}})
		require.ErrorIs(t, err, matchmaking.ErrConsentRequired)
		assert.Equal(t, errcode.ConsentRequired, errcode.Of(err))
	})

	p, err := n1.Match.Invite(ctx, mal.Principal(), "duel", match.TicketRequest{Skill: 1, Party: []string{"VICTIM"}})
	require.NoError(t, err)
	assert.Equal(t, matchmaking.Pending, p.State)
	inv := fv.First(t, matchmaking.EventPartyInvite, nil)
	assert.Equal(t, p.Ticket.ID, inv["ticket"])
	assert.Equal(t, "mallory", inv["leader"])

	t.Run("the invitee's own ticket is not blocked and is matched apart", func(t *testing.T) {
		own, err := n2.Match.Submit(ctx, vic.Principal(), "duel", match.TicketRequest{Skill: 1})
		require.NoError(t, err)
		st, err := n2.Match.Cancel(ctx, vic.Principal(), "duel", own.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, matchmaking.Cancelled, st.State)
		assert.False(t, hasType(fv.All(), matchmaking.EventMatched), "the victim was matched with nobody")
	})
	t.Run("a stranger can neither accept nor decline", func(t *testing.T) {
		eve, _ := n2.Connect(t, "eve")
		_, err := n2.Match.Accept(ctx, eve.Principal(), "duel", p.Ticket.ID)
		assert.ErrorIs(t, err, matchmaking.ErrUnknownTicket)
		_, err = n2.Match.Decline(ctx, eve.Principal(), "duel", p.Ticket.ID)
		assert.ErrorIs(t, err, matchmaking.ErrUnknownTicket)
		_, err = n1.Match.Accept(ctx, mal.Principal(), "duel", p.Ticket.ID)
		assert.ErrorIs(t, err, matchmaking.ErrUnknownTicket, "the leader does not accept for the invitee")
	})
	t.Run("a decline dissolves the party and the leader is told", func(t *testing.T) {
		st, err := n2.Match.Decline(ctx, vic.Principal(), "duel", p.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, matchmaking.Cancelled, st.State)
		ev := fm.First(t, matchmaking.EventPartyUpdate, nil)
		assert.Equal(t, matchmaking.ReasonDeclined, ev["reason"])
		assert.Equal(t, "cancelled", ev["state"])
		assert.Equal(t, "Victim", ev["user"])
		pev := pollMatch(t, n2, mal.Principal(), matchmaking.EventPartyUpdate)
		assert.Equal(t, p.Ticket.ID, pev.Ticket, "a REST poll shows it too")
		_, err = n2.Match.Accept(ctx, vic.Principal(), "duel", p.Ticket.ID)
		assert.ErrorIs(t, err, matchmaking.ErrNotPending)
	})
	t.Run("an accepted invitation queues the party", func(t *testing.T) {
		q, err := n1.Match.Invite(ctx, mal.Principal(), "duel", match.TicketRequest{Skill: 1, Party: []string{"victim"}})
		require.NoError(t, err)
		st, err := n2.Match.Accept(ctx, vic.Principal(), "duel", q.Ticket.ID)
		require.NoError(t, err)
		assert.Contains(t, []matchmaking.State{matchmaking.Waiting, matchmaking.Matched}, st.State)
		assert.Equal(t, q.Ticket.ID, fv.First(t, matchmaking.EventMatched, nil)["ticket"])
	})
	t.Run("an invitee going offline dissolves the party and the leader is told", func(t *testing.T) {
		gone, fg := n2.Connect(t, "gone")
		require.Eventually(t, func() bool {
			st, err := n1.Services.Presence.Get(ctx, "gone")
			return err == nil && st.Online
		}, 20*time.Second, 10*time.Millisecond)
		q, err := n1.Match.Invite(ctx, mal.Principal(), "duel", match.TicketRequest{Skill: 1, Party: []string{"gone"}})
		require.NoError(t, err)
		fg.First(t, matchmaking.EventPartyInvite, nil)
		gone.Close(realtime.CloseNormal, "")
		ev := fm.First(t, matchmaking.EventPartyUpdate, func(m map[string]any) bool { return m["ticket"] == q.Ticket.ID })
		assert.Equal(t, matchmaking.ReasonOffline, ev["reason"])
		assert.Equal(t, "gone", ev["user"])
		st, err := n1.Match.Status(ctx, mal.Principal(), "duel", q.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, matchmaking.Cancelled, st.State)
	})
}
