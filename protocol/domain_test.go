package protocol_test

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/rooms"
)

// TestDomainEventsAreProtocolEvents: the events the domain packages encode
// once and the server forwards byte for byte (a room's message and
// presence events, matchmaking's matched, ticket_expired and party
// events) are protocol
// events: each decodes strictly (no field the type lacks) and encodes
// again to the same bytes.
func TestDomainEventsAreProtocolEvents(t *testing.T) {
	ts := time.Date(2026, 3, 1, 12, 0, 0, 7_000_000, time.UTC)
	msg := &rooms.Message{ID: "1772366400007-000001", Room: "general-3", From: "alice", Text: "hi", TS: ts}
	m := matchmaking.Match{ID: "quick-4", Queue: "quick", Players: []string{"alice", "bob"}, Created: ts,
		Tickets: []matchmaking.Ticket{{ID: "T1", Queue: "quick", User: "alice", Party: []string{"bob"}}}}
	pending := matchmaking.Status{Ticket: matchmaking.Ticket{ID: "T2", Queue: "quick", User: "alice", Party: []string{"bob"},
		Accepted: []string{"bob"}, Created: ts, Expires: ts.Add(time.Minute)}, State: matchmaking.Pending}
	for name, v := range map[string]any{
		"message":        rooms.Event{Type: rooms.EventMessage, Message: msg},
		"presence":       rooms.Event{Type: rooms.EventPresence, Room: "general-3", User: "bob", State: rooms.StateJoined},
		"matched":        matchmaking.MatchedEvents(m, "match-quick-4", 30*time.Second)[0].Event,
		"ticket_expired": matchmaking.ExpiredEvent(m.Tickets[0], ts).Event,
		"party_invite":   matchmaking.PartyInviteEvent(pending).Event,
		"party_update":   matchmaking.PartyUpdateEvent(pending, "bob", "accepted", ts).Event,
	} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(v)
			require.NoError(t, err)
			ev, err := protocol.DecodeEvent(b)
			require.NoError(t, err)
			require.Equal(t, name, ev.EventType())
			strict := json.NewDecoder(bytes.NewReader(b))
			strict.DisallowUnknownFields()
			into := reflectNew(ev)
			require.NoError(t, strict.Decode(into), "%s has a field the protocol type lacks", b)
			again, err := protocol.Encode(ev)
			require.NoError(t, err)
			assert.JSONEq(t, string(b), string(again))
		})
	}
}
