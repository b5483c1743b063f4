package deploy

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/client"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/chatdtest"
)

// TestIdentityAndAccessOnThreeNodes runs #40's reproductions 1–4 as a
// hostile guest would, against three real chatd processes, each user on a
// node of its own address (the Go SDK over REST, the default queue
// "quick": two players, parties of two):
//
//  1. one's own name in another case in a party is refused, as a ticket
//     and as an invitation (it made a 2-player match of one person);
//  2. a second ticket under another case of one's name is refused
//     ticket_open (two tickets of one person were matched together);
//  3. a party naming someone without their consent queues, matches and
//     blocks nobody: the ticket is refused consent_required, an invitation
//     leaves the invitee free to queue alone, and only the invitee's
//     acceptance queues the party;
//  4. an outsider cannot read a private match room's history or its
//     members, nor claim its seat: 404 unknown_room, as for a room that
//     does not exist (a 403 would confirm a guessed id).
func TestIdentityAndAccessOnThreeNodes(t *testing.T) {
	skipShort(t)
	t.Parallel()
	c := chatdtest.Start(t, chatdtest.Options{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	user := func(node int, name string) *client.Client {
		t.Helper()
		cl, err := client.New(client.Config{BaseURL: c.Nodes[node%3].URL})
		require.NoError(t, err)
		require.NoError(t, cl.SignIn(ctx, name))
		_, err = cl.PollOnce(ctx, 0) // online, on that node
		require.NoError(t, err)
		return cl
	}
	code := func(err error) errcode.Code { return errcode.Of(err) }

	t.Run("1: one's own name in capitals is no party", func(t *testing.T) {
		solo := user(0, "solo40")
		_, err := solo.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 1, Party: []string{"SOLO40"}})
		require.Error(t, err, "a party of solo40 and SOLO40 was queued")
		_, err = solo.InviteParty(ctx, "quick", client.TicketRequest{Skill: 1, Party: []string{"Solo40"}})
		assert.Equal(t, errcode.BadValue, code(err), "%v", err)
	})

	t.Run("2: one person holds one ticket per queue, whatever the case", func(t *testing.T) {
		up := user(1, "Dup40")
		st, err := up.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 5e8})
		require.NoError(t, err)
		require.NoError(t, up.SignOut(ctx))
		low := user(2, "dup40")
		_, err = low.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 5e8})
		assert.Equal(t, errcode.TicketOpen, code(err), "dup40 is Dup40: %v", err)
		gone, err := low.CancelTicket(ctx, "quick", st.ID)
		require.NoError(t, err, "the ticket is the person's, by any case")
		assert.Equal(t, "cancelled", gone.State)
	})

	t.Run("3: nobody is queued, matched or blocked without consent", func(t *testing.T) {
		mallory := user(0, "mallory40")
		victim := user(1, "Victim40")
		_, err := mallory.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: -5e8, Party: []string{"victim40"}})
		require.Equal(t, errcode.ConsentRequired, code(err), "a ticket naming the victim: %v", err)
		p, err := mallory.InviteParty(ctx, "quick", client.TicketRequest{Skill: -5e8, Party: []string{"VICTIM40"}})
		require.NoError(t, err)
		assert.Equal(t, "pending", p.State)

		own, err := victim.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 7e8})
		require.NoError(t, err, "the victim's own ticket is not blocked")
		assert.Equal(t, "waiting", own.State)
		_, err = victim.AcceptParty(ctx, "quick", p.ID)
		assert.Equal(t, errcode.TicketOpen, code(err), "accepting while queued alone: %v", err)
		_, err = victim.CancelTicket(ctx, "quick", own.ID)
		require.NoError(t, err)

		outsider := user(2, "eve40")
		_, err = outsider.AcceptParty(ctx, "quick", p.ID)
		assert.Equal(t, errcode.UnknownTicket, code(err), "nobody accepts for the victim")
		_, err = mallory.AcceptParty(ctx, "quick", p.ID)
		assert.Equal(t, errcode.UnknownTicket, code(err), "the leader does not accept for the victim")

		r, err := victim.PollOnce(ctx, time.Second)
		require.NoError(t, err)
		var invited bool
		for _, ev := range r.Match {
			invited = invited || (ev.Type == "party_invite" && ev.Ticket == p.ID)
			assert.NotEqual(t, "matched", ev.Type, "the victim was matched: %+v", ev)
		}
		assert.True(t, invited, "the victim's poll shows the invitation")

		st, err := victim.DeclineParty(ctx, "quick", p.ID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", st.State)
		st, err = mallory.Ticket(ctx, "quick", p.ID)
		require.NoError(t, err)
		assert.Equal(t, "cancelled", st.State, "the leader reads the party dissolved")
	})

	t.Run("4: a private match room is unreadable from outside", func(t *testing.T) {
		ann, bob, eve := user(0, "ann40"), user(1, "bob40"), user(2, "snoop40")
		ta, err := ann.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 9e8})
		require.NoError(t, err)
		_, err = bob.SubmitTicket(ctx, "quick", client.TicketRequest{Skill: 9e8})
		require.NoError(t, err)
		var room string
		require.Eventually(t, func() bool {
			st, err := ann.Ticket(ctx, "quick", ta.ID)
			room = st.Room
			return err == nil && room != ""
		}, time.Minute, 50*time.Millisecond, "ann and bob are matched")
		_, err = ann.JoinRoom(ctx, room)
		require.NoError(t, err)
		_, err = ann.Post(ctx, room, "the plan is secret")
		require.NoError(t, err)

		_, err = eve.History(ctx, room, client.HistoryOptions{})
		assert.Equal(t, errcode.UnknownRoom, code(err), "an outsider reads the history: %v", err)
		_, err = eve.Room(ctx, room)
		assert.Equal(t, errcode.UnknownRoom, code(err), "an outsider reads the members: %v", err)
		var ce *client.Error
		if assert.True(t, errors.As(err, &ce)) {
			assert.Equal(t, 404, ce.Status)
		}
		_, err = eve.JoinRoom(ctx, room)
		assert.Equal(t, errcode.UnknownRoom, code(err), "an outsider's seat claim answers as for no room: %v", err)

		msgs, err := bob.History(ctx, room, client.HistoryOptions{})
		require.NoError(t, err, "a player reads it")
		require.NotEmpty(t, msgs)
		assert.Equal(t, "the plan is secret", msgs[len(msgs)-1].Text)
	})
}
