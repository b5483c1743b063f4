package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/rooms"
)

// recordingTransport hands every event written to it to a channel.
type recordingTransport struct{ got chan []byte }

func newRecording() recordingTransport { return recordingTransport{got: make(chan []byte, 256)} }

func (t recordingTransport) Write(events [][]byte) error {
	for _, e := range events {
		t.got <- append([]byte(nil), e...)
	}
	return nil
}
func (recordingTransport) Ping() error       { return nil }
func (recordingTransport) Close(int, string) {}

// until returns the events written up to and including the message whose
// text is last (messages of one room arrive in order, so it is the
// barrier for everything published before it).
func (t recordingTransport) until(tb testing.TB, last string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	deadline := time.After(30 * time.Second)
	for {
		select {
		case b := <-t.got:
			var ev map[string]any
			require.NoError(tb, json.Unmarshal(b, &ev))
			out = append(out, ev)
			if m, ok := ev["message"].(map[string]any); ok && m["text"] == last {
				return out
			}
		case <-deadline:
			tb.Fatalf("no message %q within 30 s; got %v", last, out)
			return nil
		}
	}
}

// said describes events as "from:text" for messages and "typing:user".
func said(evs []map[string]any) []string {
	var out []string
	for _, ev := range evs {
		switch ev["type"] {
		case "message":
			m := ev["message"].(map[string]any)
			out = append(out, fmt.Sprintf("%s:%s", m["from"], m["text"]))
		case "typing":
			out = append(out, fmt.Sprintf("typing:%s", ev["user"]))
		}
	}
	return out
}

func roomMessage(seq int, from, text string) rooms.Message {
	return rooms.Message{ID: fmt.Sprintf("1764504000123-%06d", seq), Room: "r-1", From: from, Text: text,
		TS: time.UnixMilli(1764504000123).UTC()}
}

// TestFanOutKeepsABlockedUsersMessagesAndTypingFromTheBlocker: in a room
// where ann blocks bob (by any case of his name), bob's messages and
// typing reach cat and not ann, whose feed moves past them all the same:
// they are neither delivered again live nor on a resume; after the set
// is emptied (an unblock), bob reaches ann again.
func TestFanOutKeepsABlockedUsersMessagesAndTypingFromTheBlocker(t *testing.T) {
	th := newTestHub(t)
	annT, catT := newRecording(), newRecording()
	ann := th.join(t, "r-1", "ann", annT, nil)
	th.join(t, "r-1", "cat", catT, nil)
	r := th.roomShard("r-1").rooms["r-1"]
	r.mu.Lock()
	annFeed := r.members[ann] // ann's own feed of the room
	r.mu.Unlock()
	ann.SetBlocks([]string{"BoB"})

	bus := th.handlers["r-1"]
	say := func(m rooms.Message) { bus.Receive("r-1", encodeMessage(&m)) }
	typing := func(user string) {
		bus.Receive("r-1", fmt.Appendf(nil, `{"type":"typing","room":"r-1","user":%q}`, user))
	}
	say(roomMessage(1, "Bob", "hidden 1"))
	typing("bob")
	say(roomMessage(2, "cat", "shown 1"))
	typing("cat")
	say(roomMessage(3, "bob", "hidden 2"))
	say(roomMessage(4, "cat", "end"))

	assert.Equal(t, []string{"cat:shown 1", "typing:cat", "cat:end"}, said(annT.until(t, "end")),
		"bob's messages and typing do not reach ann")
	assert.Equal(t, []string{"Bob:hidden 1", "typing:bob", "cat:shown 1", "bob:hidden 2", "cat:end"}, said(catT.until(t, "end")),
		"they reach cat")
	require.Equal(t, "1764504000123-000004", annFeed.Last(), "ann's feed moved past the hidden messages")

	// the bus delivers a hidden message again, and ann resumes after the
	// first one: nothing comes twice, nothing hidden comes at all
	say(roomMessage(3, "bob", "hidden 2"))
	hist := []rooms.Message{roomMessage(1, "Bob", "hidden 1"), roomMessage(2, "cat", "shown 1"),
		roomMessage(3, "bob", "hidden 2"), roomMessage(4, "cat", "end"), roomMessage(5, "bob", "hidden 3"),
		roomMessage(6, "cat", "resumed")}
	read := func(_ context.Context, after string, limit int) ([]rooms.Message, error) {
		var out []rooms.Message
		for _, m := range hist {
			if m.ID > after && len(out) < limit {
				out = append(out, m)
			}
		}
		return out, nil
	}
	resumed := NewFeed(hist[0].ID, ann.deliverMessage)
	resumed.Live(hist[4].ID, encodeMessage(&hist[4])) // live while it reads: held
	require.NoError(t, resumed.CatchUp(context.Background(), read, JoinHistory, ResumeMax, nil))
	resumed.Live(hist[2].ID, encodeMessage(&hist[2]))
	resumed.Live(hist[5].ID, encodeMessage(&hist[5]))
	assert.Equal(t, hist[5].ID, resumed.Last(), "the resumed feed is past every message, hidden or not")
	assert.Equal(t, []string{"cat:shown 1", "cat:end", "cat:resumed"}, said(annT.until(t, "resumed")),
		"a resume replays what ann may see, each once")

	// unblock: bob reaches ann again from then on
	ann.SetBlocks(nil)
	assert.Nil(t, ann.BlockSet())
	say(roomMessage(7, "bob", "back"))
	typing("bob")
	say(roomMessage(8, "cat", "end 2"))
	assert.Equal(t, []string{"bob:back", "typing:bob", "cat:end 2"}, said(annT.until(t, "end 2")))
}

func TestBlocksReadTheSenderAtItsPlace(t *testing.T) {
	bl := NewBlocks([]string{"Bob", "x_y-1"})
	m := roomMessage(1, "BOB", `a "quoted" text`)
	for _, tc := range []struct {
		name  string
		frame []byte
		hides bool
	}{
		{"a history page's frame", encodeMessage(&m), true},
		{"the send script's frame", []byte(`{"type":"message","message":{"id":"1764504000123-000001","room":"r-1","from":"x_Y-1","text":"hi","ts":"2026-11-30T12:00:00.123Z"}}`), true},
		{"another sender", []byte(`{"type":"message","message":{"id":"1764504000123-000001","room":"r-1","from":"bobby","text":"bob"}}`), false},
		{"fields in another order: decoded", []byte(`{"type":"message","message":{"from":"bob","id":"1764504000123-000001","room":"r-1"}}`), true},
		{"the system", []byte(`{"type":"message","message":{"id":"1764504000123-000001","room":"r-1","from":"@system","text":"x"}}`), false},
		{"a name too long to be one", []byte(`{"type":"message","message":{"id":"1","room":"r-1","from":"` + string(make([]byte, 40)) + `"}}`), false},
		{"not JSON", []byte(`{"type":"message","message":{"id":"1","room`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.hides, bl.hidesMessage(tc.frame))
		})
	}
	var none *Blocks
	assert.False(t, none.Hides("bob"), "nil blocks nobody")
	assert.Nil(t, NewBlocks(nil))
	msgs := []rooms.Message{roomMessage(1, "bob", "a"), roomMessage(2, "cat", "b"), roomMessage(3, "BOB", "c")}
	assert.Equal(t, []rooms.Message{msgs[1]}, bl.Messages(msgs))
	assert.Equal(t, msgs, none.Messages(msgs))
}

// BenchmarkBlocksHidesMessage is the filter's cost for a member who
// blocks someone: the sender read from the frame and looked up.
func BenchmarkBlocksHidesMessage(b *testing.B) {
	bl := NewBlocks([]string{"bob", "carol"})
	frame := []byte(`{"type":"message","message":{"id":"1764504000123-000001","room":"bench","from":"Alice","text":"hello, world","ts":"2026-11-30T12:00:00.123Z"}}`)
	b.ReportAllocs()
	for range b.N {
		if bl.hidesMessage(frame) {
			b.Fatal("alice is not blocked")
		}
	}
}

// gatedLister answers each Blocks call with the next list sent on answers.
type gatedLister struct {
	asked   chan string
	answers chan []string
}

func (g gatedLister) Blocks(ctx context.Context, user string) ([]string, error) {
	g.asked <- user
	select {
	case l := <-g.answers:
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestClientBlocksAChangeWinsOverALoadInFlight: a client's first read of
// its set answers after a change's event came (the read saw the set
// before the change): the event's set stands; Enter waits for the set;
// a later read (after a bus gap) that answers replaces it.
func TestClientBlocksAChangeWinsOverALoadInFlight(t *testing.T) {
	th := newTestHub(t)
	g := gatedLister{asked: make(chan string, 4), answers: make(chan []string)}
	th.d.blocks = g
	th.d.env = th.env
	c, err := th.Register(newRecording(), Principal{User: "Ann"}, ClientOptions{ID: "c1"}, 0)
	require.NoError(t, err)
	t.Cleanup(func() { c.ping.Stop() })
	require.Equal(t, "ann", <-g.asked, "the set is read by canonical name")
	select {
	case <-c.bl.ready:
		t.Fatal("ready before the set was read")
	default:
	}
	c.SetBlocks([]string{"bob"}) // the change's event, while the read runs
	require.NoError(t, c.waitBlocks(context.Background()), "an event makes the set known")
	g.answers <- nil // the read's answer, from before the change: dropped whenever it lands
	done := make(chan struct{})
	go func() { th.ReloadBlocks(context.Background()); close(done) }()
	require.Equal(t, "ann", <-g.asked)
	assert.True(t, c.BlockSet().Hides("BOB"), "the older read did not undo the change")
	g.answers <- []string{"carol"}
	<-done
	assert.False(t, c.BlockSet().Hides("bob"))
	assert.True(t, c.BlockSet().Hides("carol"), "a read after the gap replaces the set")
}
