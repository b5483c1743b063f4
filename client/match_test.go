package client_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/chatdtest"
)

// TestTwoGameClientsAreMatchedOverREST: two REST game clients on two
// nodes queue in the default queue, learn of their match in the poll's
// match section, join its room by id and read each other there.
func TestTwoGameClientsAreMatchedOverREST(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx := ctxT(t)
	alice := newClient(t, "alice", client.Config{BaseURL: cl.Nodes[0].URL})
	bob := newClient(t, "bob", client.Config{BaseURL: cl.Nodes[1].URL})
	for _, c := range []*client.Client{alice, bob} {
		_, err := c.PollOnce(ctx, 0) // the first poll: every section
		require.NoError(t, err)
	}

	ta, err := alice.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 1000})
	require.NoError(t, err)
	assert.Equal(t, "waiting", ta.State)
	_, err = alice.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 1000})
	assert.Equal(t, errcode.TicketOpen, errcode.Of(err))
	tb, err := bob.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 1010})
	require.NoError(t, err)

	matched := func(c *client.Client, ticket string) client.MatchEvent {
		var ev client.MatchEvent
		require.Eventually(t, func() bool {
			r, err := c.PollOnce(ctx, time.Second)
			if err != nil {
				return false
			}
			for _, e := range r.Match {
				if e.Type == "matched" && e.Ticket == ticket {
					ev = e
					return true
				}
			}
			return false
		}, wait, 10*time.Millisecond)
		return ev
	}
	ea, eb := matched(alice, ta.ID), matched(bob, tb.ID)
	require.NotEmpty(t, ea.Room)
	assert.Equal(t, ea.Room, eb.Room)
	assert.ElementsMatch(t, []string{"alice", "bob"}, ea.Players)
	st, err := bob.Ticket(ctx, "quick", tb.ID)
	require.NoError(t, err)
	assert.Equal(t, "matched", st.State)
	assert.Equal(t, ea.Room, st.Room)

	for _, c := range []*client.Client{alice, bob} {
		_, err := c.JoinRoom(ctx, ea.Room)
		require.NoError(t, err)
	}
	_, err = alice.Post(ctx, ea.Room, "glhf")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r, err := bob.PollOnce(ctx, time.Second)
		return err == nil && len(r.Messages[ea.Room]) > 0 && r.Messages[ea.Room][0].Text == "glhf"
	}, wait, 10*time.Millisecond)

	gone, err := alice.CancelTicket(ctx, "quick", ta.ID)
	require.NoError(t, err)
	assert.Equal(t, "matched", gone.State, "a cancel after the match answers how it ended")
}

// TestAPartyIsFormedByInvitationOverREST: a ticket naming a party is
// refused consent_required; an invitation reaches the invitee in the
// poll's match section, does not block their own ticket, and queues the
// party once accepted (#40).
func TestAPartyIsFormedByInvitationOverREST(t *testing.T) {
	skipShort(t)
	cl := chatdtest.Start(t, chatdtest.Options{Nodes: 2})
	ctx := ctxT(t)
	alice := newClient(t, "alice", client.Config{BaseURL: cl.Nodes[0].URL})
	bob := newClient(t, "Bob", client.Config{BaseURL: cl.Nodes[1].URL})
	for _, c := range []*client.Client{alice, bob} {
		_, err := c.PollOnce(ctx, 0) // online, and every section
		require.NoError(t, err)
	}

	_, err := alice.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 1, Party: []string{"bob"}})
	assert.Equal(t, errcode.ConsentRequired, errcode.Of(err))
	p, err := alice.InviteParty(ctx, "quick", client.TicketRequest{Skill: 1, Party: []string{"bob"}})
	require.NoError(t, err)
	assert.Equal(t, "pending", p.State)
	assert.NotZero(t, p.Expires)

	var inv client.MatchEvent
	require.Eventually(t, func() bool {
		r, err := bob.PollOnce(ctx, time.Second)
		if err != nil {
			return false
		}
		for _, e := range r.Match {
			if e.Type == "party_invite" && e.Ticket == p.ID {
				inv = e
				return true
			}
		}
		return false
	}, wait, 10*time.Millisecond)
	assert.Equal(t, "alice", inv.Leader)

	own, err := bob.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 1e9})
	require.NoError(t, err, "the invitation blocks nothing")
	_, err = bob.CancelTicket(ctx, "quick", own.ID)
	require.NoError(t, err)
	_, err = alice.AcceptParty(ctx, "quick", p.ID)
	assert.Equal(t, errcode.UnknownTicket, errcode.Of(err), "the leader does not accept for bob")
	st, err := bob.AcceptParty(ctx, "quick", p.ID)
	require.NoError(t, err)
	assert.Contains(t, []string{"waiting", "matched"}, st.State)
	assert.Equal(t, []string{"bob"}, st.Accepted)
}
