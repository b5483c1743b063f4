package matchmaking

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

// trioDefs: "trio" matches any two or three tickets; in "quad" a party of
// three waits for a fourth player, so a test can look at it queued without
// racing the matcher.
const trioDefs = `{"trio":{"min":2,"max":3,"window":1e9,"widen_per_second":0,"max_wait_seconds":600,"max_party":3},` +
	`"quad":{"min":4,"max":4,"window":1e9,"widen_per_second":0,"max_wait_seconds":600,"max_party":3}}`

func invite(t *testing.T, s *Service, queue string, tk Ticket) Status {
	t.Helper()
	st, err := s.Invite(context.Background(), queue, tk)
	require.NoError(t, err)
	require.Equal(t, Pending, st.State)
	return st
}

// TestPartyConsent: a party queues only once every invitee accepted; until
// then it is in no index, so it queues, matches and blocks nobody.
func TestPartyConsent(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		n, clock, _, _ := one(t, r, trioDefs)
		s := n.svc

		t.Run("a pending party does not block its invitees", func(t *testing.T) {
			p := invite(t, s, "trio", Ticket{User: "mallory", Party: []string{"Victim1", "victim2"}, Skill: 1})
			assert.Equal(t, []string{"Victim1", "victim2"}, p.Ticket.Party)
			assert.Equal(t, clock.Now().Add(defaultInviteTTL), p.Ticket.Expires)
			_, err := s.CancelUser(ctx, "trio", "victim1")
			require.ErrorIs(t, err, ErrUnknownTicket, "the victim has no ticket: nobody queued them")
			own := submit(t, s, "trio", Ticket{User: "VICTIM1", Skill: 1})
			st, err := s.Cancel(ctx, "trio", own)
			require.NoError(t, err)
			assert.Equal(t, Cancelled, st.State)
			d, err := s.Depth(ctx, "trio")
			require.NoError(t, err)
			assert.Zero(t, d.Tickets, "the pending party is not in the queue")
		})
		t.Run("it queues once the last invitee accepts, in any case", func(t *testing.T) {
			// in "quad": a full party of three in "trio" is a match by
			// itself, which the matcher may form before the Submit below
			p := invite(t, s, "quad", Ticket{User: "lead", Party: []string{"Ann", "bo"}, Skill: 1})
			st, err := s.Accept(ctx, "quad", p.Ticket.ID, "ANN")
			require.NoError(t, err)
			assert.Equal(t, Pending, st.State)
			assert.Equal(t, []string{"ann"}, st.Ticket.Accepted)
			st, err = s.Accept(ctx, "quad", p.Ticket.ID, "ann")
			require.NoError(t, err, "accepting twice is one acceptance")
			assert.Equal(t, []string{"ann"}, st.Ticket.Accepted)
			st, err = s.Accept(ctx, "quad", p.Ticket.ID, "bo")
			require.NoError(t, err)
			assert.Equal(t, Waiting, st.State)
			_, err = s.Submit(ctx, "quad", Ticket{User: "Bo", Skill: 1})
			assert.ErrorIs(t, err, ErrTicketOpen, "queued now, bo holds this ticket")
			// bo's acceptance asked again: go-redis's retry of the call
			// that queued the party, whose answer was lost. It worked, so
			// it is answered as it was (a 409 told bo it had failed, and
			// nobody heard of the queued party), and nothing is redone.
			submitted := testkit.Value(t, s.m.tickets, "quad", "submitted")
			st, err = s.Accept(ctx, "quad", p.Ticket.ID, "bo")
			require.NoError(t, err, "a retry of the acceptance that queued the party")
			assert.Equal(t, Waiting, st.State)
			assert.Equal(t, []string{"ann", "bo"}, st.Ticket.Accepted)
			assert.Equal(t, submitted, testkit.Value(t, s.m.tickets, "quad", "submitted"), "queued once")
			d, err := s.Depth(ctx, "quad")
			require.NoError(t, err)
			assert.EqualValues(t, 1, d.Tickets)
			_, err = s.Cancel(ctx, "quad", p.Ticket.ID)
			require.NoError(t, err)
		})
		t.Run("only an invitee accepts; anyone else learns nothing", func(t *testing.T) {
			p := invite(t, s, "trio", Ticket{User: "lead2", Party: []string{"cy"}, Skill: 1})
			for _, u := range []string{"lead2", "eve", "LEAD2"} {
				_, err := s.Accept(ctx, "trio", p.Ticket.ID, u)
				assert.ErrorIs(t, err, ErrUnknownTicket, u)
			}
			_, err := s.Accept(ctx, "trio", "AAAAAAAAAAAAAAAAAAAAAAAAAA", "cy")
			assert.ErrorIs(t, err, ErrUnknownTicket)
		})
		t.Run("a declined party is dissolved", func(t *testing.T) {
			p := invite(t, s, "trio", Ticket{User: "lead3", Party: []string{"di", "ed"}, Skill: 1})
			_, err := s.Accept(ctx, "trio", p.Ticket.ID, "di")
			require.NoError(t, err)
			st, err := s.Cancel(ctx, "trio", p.Ticket.ID) // ed declines
			require.NoError(t, err)
			assert.Equal(t, Cancelled, st.State)
			_, err = s.Accept(ctx, "trio", p.Ticket.ID, "ed")
			assert.ErrorIs(t, err, ErrNotPending)
		})
		t.Run("the last acceptance waits for a member's open ticket", func(t *testing.T) {
			p := invite(t, s, "trio", Ticket{User: "lead4", Party: []string{"fay"}, Skill: 1})
			own := submit(t, s, "trio", Ticket{User: "FAY", Skill: 1e9})
			_, err := s.Accept(ctx, "trio", p.Ticket.ID, "fay")
			require.ErrorIs(t, err, ErrTicketOpen)
			assert.Equal(t, errcode.TicketOpen, errcode.Of(err))
			_, err = s.Cancel(ctx, "trio", own)
			require.NoError(t, err)
			st, err := s.Accept(ctx, "trio", p.Ticket.ID, "fay")
			require.NoError(t, err)
			assert.Equal(t, Waiting, st.State)
			_, err = s.Cancel(ctx, "trio", p.Ticket.ID)
			require.NoError(t, err)
		})
		t.Run("a party naming its leader in another case is refused", func(t *testing.T) {
			for _, party := range [][]string{{"Solo"}, {"SOLO", "x"}, {"x", "X"}, nil} {
				_, err := s.Invite(ctx, "trio", Ticket{User: "solo", Party: party, Skill: 1})
				assert.ErrorIs(t, err, ErrBadTicket, "%v", party)
			}
		})
	})
}

// TestPartyInvitationsExpire: a party not accepted by everyone within the
// invitations' TTL expires, and its players are told (OnExpired), even
// after an acceptance.
func TestPartyInvitationsExpire(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		n, clock, rec, _ := one(t, r, trioDefs)
		s := n.svc
		p := invite(t, s, "trio", Ticket{User: "lead", Party: []string{"gus", "hal"}, Skill: 1})
		_, err := s.Accept(ctx, "trio", p.Ticket.ID, "gus")
		require.NoError(t, err)
		late := invite(t, s, "trio", Ticket{User: "lead2", Party: []string{"ivy"}, Skill: 1})

		clock.Add(defaultInviteTTL)
		waitFor(t, 5*time.Second, "the party expires and its players are told", func() bool {
			_, xs, _ := rec.snapshot()
			_, ok := xs[p.Ticket.ID]
			return ok
		})
		_, xs, _ := rec.snapshot()
		assert.Equal(t, []string{"lead", "gus", "hal"}, xs[p.Ticket.ID].Players())
		st, err := s.Status(ctx, "trio", p.Ticket.ID)
		require.NoError(t, err)
		assert.Equal(t, Expired, st.State)
		_, err = s.Accept(ctx, "trio", p.Ticket.ID, "hal")
		assert.ErrorIs(t, err, ErrNotPending, "too late")

		// An acceptance after the deadline, before the matcher's sweep,
		// is too late as well.
		_, err = s.Accept(ctx, "trio", late.Ticket.ID, "ivy")
		if err == nil {
			t.Fatal("an acceptance past the deadline queued the party")
		}
		assert.ErrorIs(t, err, ErrNotPending)
		d, err := s.Depth(ctx, "trio")
		require.NoError(t, err)
		assert.Zero(t, d.Tickets)
	})
}
