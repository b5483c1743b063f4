package rooms

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

func ids(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func TestSendAndHistory(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	clock := newClock()
	s := nodes(t, r, 1, Config{Now: clock.Now})[0]
	for _, u := range []string{"alice", "bob"} {
		_, err := s.Seats.Join(ctx, "general", u, ws1)
		require.NoError(t, err)
	}
	events := subscribe(t, r.NewClient(t), s.Messages.Channel("general-1"))

	var sent []Message
	for i := range 25 {
		clock.Add(1500 * time.Microsecond)
		m, err := s.say(ctx, "general-1", []string{"alice", "bob"}[i%2], fmt.Sprintf("m%d <&> \"é\"", i))
		require.NoError(t, err)
		sent = append(sent, m)
	}

	t.Run("the channel carries each message event byte for byte as sent", func(t *testing.T) {
		for _, m := range sent {
			want, err := json.Marshal(Event{Type: EventMessage, Message: &m})
			require.NoError(t, err)
			select {
			case got := <-events:
				assert.Equal(t, string(want), got.Payload)
			case <-time.After(5 * time.Second):
				t.Fatal("no event")
			}
		}
	})

	t.Run("history returns the latest oldest first, ids sorted as strings", func(t *testing.T) {
		h, err := s.Messages.History(ctx, "general-1", "", 10)
		require.NoError(t, err)
		assert.Equal(t, sent[15:], h)
		assert.True(t, sort.StringsAreSorted(ids(h)))
	})

	t.Run("history after an id returns only what came later", func(t *testing.T) {
		h, err := s.Messages.History(ctx, "general-1", sent[4].ID, 3)
		require.NoError(t, err)
		assert.Equal(t, sent[5:8], h)
		h, err = s.Messages.History(ctx, "general-1", sent[24].ID, 0)
		require.NoError(t, err)
		assert.Empty(t, h)
	})

	t.Run("history accepts the raw stream id too", func(t *testing.T) {
		ms, seq, err := parseID(sent[4].ID)
		require.NoError(t, err)
		h, err := s.Messages.History(ctx, "general-1", fmt.Sprintf("%d-%d", ms, seq), 1)
		require.NoError(t, err)
		assert.Equal(t, sent[5:6], h)
	})

	t.Run("message times are the sender's clock in ms", func(t *testing.T) {
		assert.Equal(t, clock.Now().Truncate(time.Millisecond).UnixMilli(), sent[24].TS.UnixMilli())
	})

	t.Run("a sender without a seat is not seated", func(t *testing.T) {
		_, err := s.say(ctx, "general-1", "carol", "hi")
		assert.ErrorIs(t, err, ErrNotSeated)
		require.NoError(t, s.Seats.Leave(ctx, "general-1", "bob"))
		_, err = s.say(ctx, "general-1", "bob", "hi")
		assert.ErrorIs(t, err, ErrNotSeated)
	})

	t.Run("an unknown room is unknown", func(t *testing.T) {
		_, err := s.say(ctx, "general-2", "alice", "hi")
		assert.ErrorIs(t, err, ErrUnknownRoom)
		_, err = s.Messages.History(ctx, "general-2", "", 10)
		assert.ErrorIs(t, err, ErrUnknownRoom)
	})

	t.Run("empty or broken text is refused", func(t *testing.T) {
		_, err := s.say(ctx, "general-1", "alice", "")
		assert.ErrorIs(t, err, ErrBadText)
		_, err = s.say(ctx, "general-1", "alice", "a\xffb")
		assert.ErrorIs(t, err, ErrBadText)
	})

	t.Run("counters count messages sent and no refused ones", func(t *testing.T) {
		msgs, rooms, err := s.Messages.Counters(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 25, msgs)
		assert.EqualValues(t, 1, rooms)
	})
}

func TestHistoryGaps(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{HistoryMax: 10})[0]
	_, err := s.Seats.Join(ctx, "g", "alice", ws1)
	require.NoError(t, err)

	t.Run("an empty room has an empty history", func(t *testing.T) {
		h, err := s.Messages.History(ctx, "g-1", "", 10)
		require.NoError(t, err)
		assert.Empty(t, h)
	})

	first, err := s.say(ctx, "g-1", "alice", "first")
	require.NoError(t, err)
	var last Message
	for i := range 300 {
		last, err = s.say(ctx, "g-1", "alice", fmt.Sprint(i))
		require.NoError(t, err)
	}

	t.Run("resuming after a trimmed message is a gap", func(t *testing.T) {
		_, err := s.Messages.History(ctx, "g-1", first.ID, 10)
		assert.ErrorIs(t, err, ErrResumeGap)
	})

	t.Run("resuming after an id that never was is a gap", func(t *testing.T) {
		_, err := s.Messages.History(ctx, "g-1", "0000000000001-000001", 10)
		assert.ErrorIs(t, err, ErrResumeGap)
		_, err = s.Messages.History(ctx, "g-1", "9999999999999-000000", 10)
		assert.ErrorIs(t, err, ErrResumeGap)
	})

	t.Run("resuming after a kept message works", func(t *testing.T) {
		h, err := s.Messages.History(ctx, "g-1", last.ID, 10)
		require.NoError(t, err)
		assert.Empty(t, h)
	})

	t.Run("history is capped near HistoryMax", func(t *testing.T) {
		h, err := s.Messages.History(ctx, "g-1", "", MaxHistoryLimit)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, len(h), 10)
		assert.Less(t, len(h), 250)
	})

	t.Run("a malformed id is refused", func(t *testing.T) {
		for _, id := range []string{"x", "1-", "-1", "1-2-3", "1.5-2", " 1-2"} {
			_, err := s.Messages.History(ctx, "g-1", id, 10)
			assert.ErrorIs(t, err, ErrBadID, id)
		}
	})
}

func TestResumeAfterRedisLostItsDataIsAGap(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	ctx := context.Background()
	s := nodes(t, r, 1, Config{})[0]
	_, err := s.Seats.Join(ctx, "g", "alice", ws1)
	require.NoError(t, err)
	m, err := s.say(ctx, "g-1", "alice", "before")
	require.NoError(t, err)
	r.Server.Restart(t)
	require.Eventually(t, func() bool { _, err := s.Seats.Join(ctx, "g", "alice", ws1); return err == nil }, 10*time.Second, 20*time.Millisecond)
	_, err = s.say(ctx, "g-1", "alice", "after")
	require.NoError(t, err)

	_, err = s.Messages.History(ctx, "g-1", m.ID, 10)
	assert.ErrorIs(t, err, ErrResumeGap)
}

func TestChannelOrderIsHistoryOrder(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	ss := nodes(t, r, 3, Config{})
	const senders, each = 6, 20
	for i := range senders {
		_, err := ss[i%3].Seats.Join(ctx, "chat", fmt.Sprintf("s%d", i), ws1)
		require.NoError(t, err)
	}
	events := subscribe(t, r.NewClient(t), ss[0].Messages.Channel("chat-1"))
	var wg sync.WaitGroup
	for i := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				_, err := ss[i%3].say(ctx, "chat-1", fmt.Sprintf("s%d", i), fmt.Sprint(j))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	var live []string
	for range senders * each {
		e := nextEvent(t, events)
		require.Equal(t, EventMessage, e.Type)
		live = append(live, e.Message.ID)
	}
	h, err := ss[1].Messages.History(ctx, "chat-1", "", MaxHistoryLimit)
	require.NoError(t, err)
	assert.Equal(t, ids(h), live, "the channel's order is the history's")
	assert.True(t, sort.StringsAreSorted(live), "ids sort as strings in send order")
	assert.Len(t, slices.Compact(slices.Clone(live)), senders*each, "ids are unique")
}

func TestMessagesOnACluster(t *testing.T) {
	t.Parallel()
	r := redistest.Cluster(t)
	ctx := context.Background()
	ss := nodes(t, r, 2, Config{HistoryMax: 10})
	var rooms []string
	for _, lobby := range []string{"a", "b", "c", "d", "e", "f"} { // spread over the masters
		room, err := ss[0].Seats.Join(ctx, lobby, "alice", ws1)
		require.NoError(t, err)
		rooms = append(rooms, room.ID)
	}
	for _, room := range rooms {
		events := subscribe(t, r.NewClient(t), ss[1].Messages.Channel(room))
		m, err := ss[1].say(ctx, room, "alice", "hello "+room)
		require.NoError(t, err)
		e := nextEvent(t, events)
		assert.Equal(t, m, *e.Message)
		h, err := ss[0].Messages.History(ctx, room, "", 5)
		require.NoError(t, err)
		assert.Equal(t, []Message{m}, h)
		_, err = ss[0].say(ctx, room, "bob", "no seat")
		assert.ErrorIs(t, err, ErrNotSeated)
	}
	msgs, created, err := ss[0].Messages.Counters(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 6, msgs)
	assert.EqualValues(t, 6, created)

	t.Run("a key is claimed across masters and counted once", func(t *testing.T) {
		// On a Cluster the key's claim (the user's slot) is a round trip
		// before the send script, and the counter a script of its own:
		// the same key in another lobby, on another master, is refused,
		// and neither it nor the duplicate is counted.
		send := func(room string) SendReply {
			return ss[1].Messages.SendMany(ctx, []SendRequest{{Room: room, User: "alice", Text: "keyed", Key: "s1:c-1"}}, SendOptions{})[0]
		}
		first := send(rooms[0])
		require.NoError(t, first.Err)
		again := send(rooms[0])
		require.NoError(t, again.Err)
		assert.True(t, again.Duplicate)
		assert.Equal(t, first.Message, again.Message)
		for _, room := range rooms[1:] {
			require.ErrorIs(t, send(room).Err, ErrIdempotencyMismatch, room)
			h, err := ss[0].Messages.History(ctx, room, "", 5)
			require.NoError(t, err)
			assert.Len(t, h, 1, "%s: only the first say", room)
		}
		n, _, err := ss[0].Messages.Counters(ctx)
		require.NoError(t, err)
		assert.EqualValues(t, 7, n)
	})

	t.Run("leases renew and sweep across masters", func(t *testing.T) {
		var seats []Attachment
		for _, room := range rooms {
			seats = append(seats, Attachment{room, "alice", "ws1"}, Attachment{room, "ghost", "ws1"})
		}
		lost, err := ss[1].Seats.Renew(ctx, seats)
		require.NoError(t, err)
		assert.Len(t, lost, len(rooms))
		_, err = ss[1].Seats.Sweep(ctx)
		require.NoError(t, err)
		require.NoError(t, ss[1].Seats.Leave(ctx, rooms[0], "alice"))
	})
}

func TestMessageJSON(t *testing.T) {
	m := Message{ID: "1764504000123-000007", Room: "general-3", From: "alice", Text: "hi",
		TS: time.Date(2026, 11, 30, 13, 0, 0, 123_000_000, time.FixedZone("CET", 3600))}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"1764504000123-000007","room":"general-3","from":"alice","text":"hi","ts":"2026-11-30T12:00:00.123Z"}`, string(b))
	var back Message
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, m.TS.Equal(back.TS))
	assert.Equal(t, m.ID, back.ID)
}

func TestPaddedIDsSortInSendOrder(t *testing.T) {
	tests := []struct {
		raw, padded string
	}{
		{"1700000000000-9", "1700000000000-000009"},
		{"1700000000000-10", "1700000000000-000010"},
		{"1700000000001-0", "1700000000001-000000"},
		{"999999999999-5", "0999999999999-000005"},
		{"1-1", "0000000000001-000001"},
	}
	var padded []string
	for _, tt := range tests {
		p, err := padID(tt.raw)
		require.NoError(t, err)
		assert.Equal(t, tt.padded, p)
		padded = append(padded, p)
	}
	assert.Less(t, "1700000000000-10", "1700000000000-9", "raw ids do not sort as strings")
	assert.Less(t, padded[0], padded[1], "padded ones do")
	assert.Less(t, padded[3], padded[0])
}

func TestDecodeEvent(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
	}{
		{"a presence event decodes", `{"type":"presence","room":"g-1","user":"a","state":"joined"}`, true},
		{"a message event decodes", `{"type":"message","message":{"id":"0000000000001-000001","room":"g-1","from":"a","text":"x","ts":"2026-11-30T12:00:00.000Z"}}`, true},
		{"an unknown state is bad", `{"type":"presence","room":"g-1","user":"a","state":"dancing"}`, false},
		{"a message without one is bad", `{"type":"message"}`, false},
		{"a message with a bad ts is bad", `{"type":"message","message":{"id":"1-1","room":"g-1","ts":"yesterday"}}`, false},
		{"an unknown type is bad", `{"type":"hello"}`, false},
		{"not JSON is bad", `{`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeEvent([]byte(tt.in))
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrBadEvent)
			}
		})
	}
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1700000000000-10", "0000000000001-000001", "1-", "-", "18446744073709551615-1", "99999999999999999999-0", "1-2-3", "٣-1"} {
		f.Add(s, "1700000000000-9")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ma, sa, errA := parseID(a)
		if errA != nil {
			return
		}
		p := formatID(ma, sa)
		m2, s2, err := parseID(p)
		require.NoError(t, err, "a formatted id parses")
		require.Equal(t, [2]uint64{ma, sa}, [2]uint64{m2, s2}, "round trip")
		mb, sb, errB := parseID(b)
		if errB != nil || ma >= 1e13 || mb >= 1e13 || sa >= 1e6 || sb >= 1e6 {
			return
		}
		numLess := ma < mb || (ma == mb && sa < sb)
		require.Equal(t, numLess, formatID(ma, sa) < formatID(mb, sb), "string order is id order: %s %s", a, b)
	})
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"type":"presence","room":"g-1","user":"a","state":"left"}`))
	f.Add([]byte(`{"type":"message","message":{"id":"0000000000001-000001","room":"g-1","from":"a","text":"x\u00e9","ts":"2026-11-30T12:00:00.5+01:00"}}`))
	f.Add([]byte(`{"type":"message","message":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEvent(b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadEvent)
			return
		}
		again, err := json.Marshal(e)
		require.NoError(t, err)
		e2, err := DecodeEvent(again)
		require.NoError(t, err, "an encoded event decodes: %s", again)
		if e.Message != nil {
			require.True(t, e.Message.TS.Truncate(time.Millisecond).Equal(e2.Message.TS))
			e.Message.TS, e2.Message.TS = time.Time{}, time.Time{}
		}
		require.Equal(t, e, e2)
	})
}
