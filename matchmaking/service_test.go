package matchmaking

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
	"github.com/chatd/chatd/names"
)

const duelDefs = `{"duel":{"min":2,"max":2,"window":100,"widen_per_second":10,"max_wait_seconds":60,"max_party":2,"reserve_seconds":30}}`

func TestSubmitCancelStatus(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, r *redistest.Redis) {
		ctx := context.Background()
		clock := newClock()
		n := newNode(t, r, setup{defs: newDefs(duelDefs), clock: clock.Now})
		s := n.svc

		id := submit(t, s, "duel", Ticket{User: "alice", Party: []string{"bob"}, Skill: 1500.25, Attributes: map[string]string{"region": "eu"}})
		assert.True(t, checkTicketID(id), id)

		t.Run("a waiting ticket reads back as submitted", func(t *testing.T) {
			st, err := s.Status(ctx, "duel", id)
			require.NoError(t, err)
			assert.Equal(t, Waiting, st.State)
			assert.Equal(t, Ticket{ID: id, Queue: "duel", User: "alice", Party: []string{"bob"}, Skill: 1500.25,
				Attributes: map[string]string{"region": "eu"}, Created: clock.Now()}, st.Ticket)
			assert.True(t, st.Ended.IsZero())
			assert.Nil(t, st.Match)
		})
		t.Run("no member may open a second ticket", func(t *testing.T) {
			for _, tk := range []Ticket{{User: "alice"}, {User: "bob"}, {User: "carol", Party: []string{"bob"}}} {
				_, err := s.Submit(ctx, "duel", tk)
				require.ErrorIs(t, err, ErrTicketOpen)
				assert.Equal(t, errcode.TicketOpen, errcode.Of(err))
				var toe *TicketOpenError
				require.ErrorAs(t, err, &toe)
				assert.Equal(t, id, toe.Ticket, "the open ticket is named, for the client to poll or cancel")
				assert.Contains(t, errcode.Message(err), "already has an open ticket")
			}
			_, err := s.CancelUser(ctx, "duel", "carol")
			assert.ErrorIs(t, err, ErrUnknownTicket, "carol's refused ticket left nothing behind")
		})
		t.Run("a retried submission answers the same ticket", func(t *testing.T) {
			q, err := s.Queue("duel")
			require.NoError(t, err)
			tk, err := Ticket{User: "dave", Skill: 1}.check(q)
			require.NoError(t, err)
			id1, fresh, err := s.enqueue(ctx, q, tk, "DAVEDAVEDAVEDAVEDAVEDAVE22")
			require.NoError(t, err)
			assert.True(t, fresh)
			id2, fresh, err := s.enqueue(ctx, q, tk, "DAVEDAVEDAVEDAVEDAVEDAVE22")
			require.NoError(t, err)
			assert.False(t, fresh, "the script found its own ticket")
			assert.Equal(t, id1, id2)
			d, err := s.Depth(ctx, "duel")
			require.NoError(t, err)
			assert.Equal(t, int64(2), d.Tickets, "enqueued once")
		})
		t.Run("depth and the oldest wait", func(t *testing.T) {
			clock.Add(3 * time.Second)
			d, err := s.Depth(ctx, "duel")
			require.NoError(t, err)
			assert.Equal(t, Depth{Tickets: 2, OldestWait: 3 * time.Second}, d)
		})
		t.Run("cancel by a party member ends the whole ticket", func(t *testing.T) {
			st, err := s.CancelUser(ctx, "duel", "bob")
			require.NoError(t, err)
			assert.Equal(t, Cancelled, st.State)
			assert.Equal(t, id, st.Ticket.ID)
			assert.Equal(t, clock.Now(), st.Ended)
			assert.Equal(t, 1.0, testkit.Value(t, s.m.tickets, "duel", "cancelled"))

			st, err = s.Status(ctx, "duel", id)
			require.NoError(t, err)
			assert.Equal(t, Cancelled, st.State, "reported, not dropped")
			ttl := r.Client.PTTL(ctx, s.keys("duel").ticket(id)).Val()
			assert.True(t, ttl > 0 && ttl <= time.Minute, "kept for the status TTL: %v", ttl)

			again, err := s.Cancel(ctx, "duel", id)
			require.NoError(t, err)
			assert.Equal(t, st, again, "a second cancel changes nothing")
			assert.Equal(t, 1.0, testkit.Value(t, s.m.tickets, "duel", "cancelled"))

			_, err = s.Submit(ctx, "duel", Ticket{User: "bob", Skill: 3})
			assert.NoError(t, err, "bob is free again")
		})
		t.Run("unknown tickets", func(t *testing.T) {
			for _, bad := range []string{"AAAAAAAAAAAAAAAAAAAAAAAAAA", "short", "aaaaaaaaaaaaaaaaaaaaaaaaaa", "AAAAAAAAAAAAAAAAAAAAAAAA}{", ""} {
				_, err := s.Status(ctx, "duel", bad)
				assert.ErrorIs(t, err, ErrUnknownTicket, bad)
				assert.Equal(t, errcode.UnknownTicket, errcode.Of(err))
				_, err = s.Cancel(ctx, "duel", bad)
				assert.ErrorIs(t, err, ErrUnknownTicket, bad)
			}
		})
	})
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	n := newNode(t, r, setup{defs: newDefs(`{"duel":{"min":2,"max":2,"window":100,"max_party":2}}`)})
	s := n.svc
	many := map[string]string{}
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		many[k] = "x"
	}
	for _, tt := range []struct {
		name   string
		queue  string
		t      Ticket
		err    error
		code   errcode.Code
		detail string
	}{
		{"an undefined queue", "solo", Ticket{User: "al"}, ErrUnknownQueue, errcode.UnknownQueue, `"solo"; the queues are duel`},
		{"a malformed queue", "a}{b", Ticket{User: "al"}, ErrUnknownQueue, errcode.UnknownQueue, `"a}{b"`},
		{"a bad user", "duel", Ticket{User: "a b"}, names.ErrBadName, errcode.BadName, "user name"},
		{"no user", "duel", Ticket{}, names.ErrBadName, errcode.BadName, "user name is empty"},
		{"a bad party member", "duel", Ticket{User: "al", Party: []string{"*"}}, names.ErrBadName, errcode.BadName, "party"},
		{"a party too large", "duel", Ticket{User: "al", Party: []string{"bo", "cy"}}, ErrBadTicket, errcode.BadValue, "a party of 3; queue duel takes at most 2"},
		{"the user in their own party", "duel", Ticket{User: "al", Party: []string{"al"}}, ErrBadTicket, errcode.BadValue, "the party names al twice"},
		{"NaN skill", "duel", Ticket{User: "al", Skill: math.NaN()}, ErrBadTicket, errcode.BadValue, "skill must be a finite number"},
		{"infinite skill", "duel", Ticket{User: "al", Skill: math.Inf(-1)}, ErrBadTicket, errcode.BadValue, "skill must be a finite number"},
		{"skill too large", "duel", Ticket{User: "al", Skill: 1e10}, ErrBadTicket, errcode.BadValue, "skill must be a finite number"},
		{"too many attributes", "duel", Ticket{User: "al", Attributes: many}, ErrBadTicket, errcode.BadValue, "9 attributes; at most 8"},
		{"a bad attribute key", "duel", Ticket{User: "al", Attributes: map[string]string{"Region": "eu"}}, ErrBadTicket, errcode.BadValue, `attribute key "Region"`},
		{"an empty attribute value", "duel", Ticket{User: "al", Attributes: map[string]string{"region": ""}}, ErrBadTicket, errcode.BadValue, "attribute region"},
		{"a long attribute value", "duel", Ticket{User: "al", Attributes: map[string]string{"region": strings.Repeat("e", 65)}}, ErrBadTicket, errcode.BadValue, "attribute region"},
		{"a spaced attribute value", "duel", Ticket{User: "al", Attributes: map[string]string{"region": "e u"}}, ErrBadTicket, errcode.BadValue, "attribute region"},
	} {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			_, err := s.Submit(ctx, tt.queue, tt.t)
			require.Error(t, err)
			assert.True(t, errors.Is(err, tt.err), "%v", err)
			assert.Equal(t, tt.code, errcode.Of(err))
			assert.Contains(t, err.Error(), tt.detail)
			assert.NotContains(t, errcode.Message(err), "matchmaking:", "the client sentence has no package prefix")
		})
	}
	d, err := s.Depth(ctx, "duel")
	require.NoError(t, err)
	assert.Zero(t, d.Tickets, "nothing refused was enqueued")
	keys, err := r.Client.Keys(ctx, r.Prefix+"*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys, "nor written")

	t.Run("no queues defined", func(t *testing.T) {
		s := New(r.Client, Config{Prefix: r.Prefix})
		_, err := s.Submit(ctx, "duel", Ticket{User: "al"})
		assert.ErrorIs(t, err, ErrUnknownQueue)
		assert.ErrorContains(t, err, "no queue is defined")
	})
	t.Run("a bad live value keeps the last good queues", func(t *testing.T) {
		d := newDefs(duelDefs)
		s := New(r.Client, Config{Prefix: r.Prefix + ":live", Queues: d.get})
		require.Len(t, s.Queues(), 1)
		d.set(`{"duel":{"min":2}}`)
		assert.Len(t, s.Queues(), 1)
		d.set(`{}`)
		assert.Empty(t, s.Queues())
	})
}

func TestSkillKeySortsAsTheNumbers(t *testing.T) {
	xs := []float64{-1e9, -1500.5, -1, -math.SmallestNonzeroFloat64, 0, math.SmallestNonzeroFloat64, 0.1, 1, 1500.25, 1500.5, 1e9}
	for i := range xs {
		got, ok := skillOfKey(skillKey(xs[i]))
		require.True(t, ok)
		assert.Equal(t, xs[i], got, "round trip")
		if i > 0 {
			assert.Less(t, skillKey(xs[i-1]), skillKey(xs[i]), "%v < %v", xs[i-1], xs[i])
		}
	}
}
