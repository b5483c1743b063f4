package match_test

import (
	"context"
	"errors"
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

// TestMatchmakingKnowsOnePersonByTheCanonicalName: names differing only
// in case are one user (names.Canonical, as at sign-in), across nodes.
// Each reproduction of #40 failed before: a guest filled a match alone
// with its name in capitals, one person held two tickets of a queue, a
// party member online under another case was "not online", and error
// messages capitalised the name.
func TestMatchmakingKnowsOnePersonByTheCanonicalName(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	n1, n2, n3 := startNode(t, r, "n1"), startNode(t, r, "n2"), startNode(t, r, "n3")
	setQueues(t, n1, `{"duel":{"min":2,"max":2,"window":1000,"max_party":2,"reserve_seconds":60},"four":{"min":4,"max":4,"window":1000,"max_party":4,"reserve_seconds":60}}`, "four", n2, n3)
	ctx := context.Background()

	t.Run("one's own name in capitals is not a party", func(t *testing.T) {
		solo, _ := n1.Connect(t, "solo")
		_, err := n1.Match.Invite(ctx, solo.Principal(), "duel", match.TicketRequest{Skill: 1, Party: []string{"SOLO"}})
		require.ErrorIs(t, err, matchmaking.ErrBadTicket)
		assert.Contains(t, errcode.Message(err), "The party names SOLO twice")
		_, err = n1.Match.Invite(ctx, solo.Principal(), "four", match.TicketRequest{Skill: 1, Party: []string{"Solo", "sOlo", "SOLO"}})
		require.ErrorIs(t, err, matchmaking.ErrBadTicket, "three case variants of one's own name are no 4-player party")
		_, err = n1.Match.Submit(ctx, solo.Principal(), "four", match.TicketRequest{Skill: 1, Party: []string{"Solo", "sOlo", "SOLO"}})
		require.ErrorIs(t, err, matchmaking.ErrConsentRequired, "nor is a ticket naming a party")
	})

	t.Run("one person has one ticket per queue, whatever the case", func(t *testing.T) {
		up, _ := n1.Connect(t, "Dup")
		_, err := n1.Match.Submit(ctx, up.Principal(), "duel", match.TicketRequest{Skill: 1e6})
		require.NoError(t, err)
		up.Close(realtime.CloseNormal, "")
		low, _ := n2.Connect(t, "dup")
		_, err = n2.Match.Submit(ctx, low.Principal(), "duel", match.TicketRequest{Skill: 1e6})
		var open *matchmaking.TicketOpenError
		require.True(t, errors.As(err, &open), "dup is Dup: %v", err)
		assert.Equal(t, "dup", open.User, "named as the caller typed it")
		msg := errcode.Message(err)
		assert.Contains(t, msg, "User dup already has an open ticket")
		assert.NotContains(t, msg, "Dup", "the name keeps its case")
		_, err = n2.Match.Service().CancelUser(ctx, "duel", "DUP")
		require.NoError(t, err, "the ticket is the person's, by any case")
	})

	t.Run("a party member online under another case is online", func(t *testing.T) {
		_, _ = n3.Connect(t, "Case")
		lead, _ := n1.Connect(t, "lead")
		require.Eventually(t, func() bool {
			st, err := n1.Services.Presence.Get(ctx, "case")
			return err == nil && st.Online
		}, 20*time.Second, 10*time.Millisecond, "Case's presence, read as case")
		_, err := n1.Match.Invite(ctx, lead.Principal(), "duel", match.TicketRequest{Skill: -1e6, Party: []string{"case"}})
		assert.NotErrorIs(t, err, realtime.ErrPartyOffline)
	})

	t.Run("an offline party member is named in lower case as given", func(t *testing.T) {
		vic, _ := n2.Connect(t, "vic")
		_, err := n2.Match.Invite(ctx, vic.Principal(), "duel", match.TicketRequest{Skill: 5, Party: []string{"zed"}})
		require.ErrorIs(t, err, realtime.ErrPartyOffline)
		assert.Contains(t, errcode.Message(err), "Party member zed is not online")
	})
}
