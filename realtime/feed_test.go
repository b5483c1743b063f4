package realtime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/rooms"
)

// history is an in-memory room stream for the Feed's unit tests: append
// publishes (calls live) after storing, like the send script.
type history struct {
	mu      sync.Mutex
	msgs    []rooms.Message
	trimmed int // ids before this index are gone
}

func id(i int) string { return fmt.Sprintf("%013d-%06d", 1700000000000, i) }

func (h *history) append(live func(string, []byte)) {
	h.mu.Lock()
	m := rooms.Message{ID: id(len(h.msgs) + 1), Room: "r-1", From: "u", Text: "t"}
	h.msgs = append(h.msgs, m)
	h.mu.Unlock()
	live(m.ID, encodeMessage(&m))
}

// read is a ReadFunc over the stream, with an optional hook run before it
// answers (to interleave live messages with a read in progress).
func (h *history) read(hook func()) ReadFunc { return h.readHooks(hook, nil) }

// readHooks runs pre before the read takes its snapshot and post after.
func (h *history) readHooks(pre, post func()) ReadFunc {
	return func(_ context.Context, after string, limit int) ([]rooms.Message, error) {
		if pre != nil {
			pre()
		}
		if post != nil {
			defer post()
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if after == "" {
			from := max(len(h.msgs)-limit, h.trimmed)
			return append([]rooms.Message(nil), h.msgs[from:]...), nil
		}
		if after == StreamStart {
			if h.trimmed > 0 {
				return nil, rooms.ErrResumeGap
			}
			return append([]rooms.Message(nil), h.msgs[:min(len(h.msgs), limit)]...), nil
		}
		i := sort.Search(len(h.msgs), func(i int) bool { return h.msgs[i].ID >= after })
		if i >= len(h.msgs) || h.msgs[i].ID != after || i < h.trimmed {
			return nil, rooms.ErrResumeGap
		}
		end := min(len(h.msgs), i+1+limit)
		return append([]rooms.Message(nil), h.msgs[i+1:end]...), nil
	}
}

type sink struct {
	mu  sync.Mutex
	ids []string
}

func (s *sink) deliver(id string, _ []byte) {
	s.mu.Lock()
	s.ids = append(s.ids, id)
	s.mu.Unlock()
}

// checkOnceInOrder asserts ids are strictly increasing and cover want.
func checkOnceInOrder(t *testing.T, got []string, from, to int) {
	t.Helper()
	for i := 1; i < len(got); i++ {
		require.Less(t, got[i-1], got[i], "delivered out of order or twice at %d", i)
	}
	var want []string
	for i := from; i <= to; i++ {
		want = append(want, id(i))
	}
	assert.Equal(t, want, got)
}

func TestFeedEveryIDOnceInOrderWhateverTheInterleaving(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := &history{}
		before := rng.IntN(300)
		for range before {
			h.append(func(string, []byte) {})
		}
		var s sink
		resumeFrom := ""
		first := before - JoinHistory + 1
		if rng.IntN(2) == 0 && before > 0 {
			k := 1 + rng.IntN(before)
			resumeFrom = id(k)
			first = k + 1
		}
		f := NewFeed(resumeFrom, s.deliver)
		// live messages arrive during the reads, in random bursts; a join
		// replays the latest JoinHistory of the stream as its first read
		// finds it
		during, reads := 0, 0
		hook := func() {
			for range rng.IntN(40) {
				h.append(f.Live)
				during++
			}
			if reads++; reads == 1 && resumeFrom == "" {
				first = len(h.msgs) - JoinHistory + 1
			}
		}
		require.NoError(t, f.CatchUp(context.Background(), h.read(hook), JoinHistory, 0, nil), "seed %d", seed)
		after := rng.IntN(20)
		for range after {
			h.append(f.Live)
		}
		checkOnceInOrder(t, s.ids, max(first, 1), before+during+after)
		if t.Failed() {
			t.Fatalf("seed %d (before %d, resume %q, during %d, after %d)", seed, before, resumeFrom, during, after)
		}
	}
}

func TestFeedHeldOverflowIsReadFromHistory(t *testing.T) {
	h := &history{}
	h.append(func(string, []byte) {})
	var s sink
	f := NewFeed(id(1), s.deliver)
	reads := 0
	hook := func() {
		reads++
		if reads == 1 {
			for range maxHeld + 500 { // more than a feed may hold
				h.append(f.Live)
			}
		}
	}
	require.NoError(t, f.CatchUp(context.Background(), h.readHooks(nil, hook), JoinHistory, 0, nil))
	h.append(f.Live)
	// the first read saw the stream before the burst: nothing new; the
	// burst overflowed the hold and came from history, page by page
	checkOnceInOrder(t, s.ids, 2, maxHeld+502)
	assert.Greater(t, reads, 2, "read the dropped messages from history")
}

func TestFeedResumeGapIsReportedBeforeAnythingIsDelivered(t *testing.T) {
	h := &history{}
	for range 10 {
		h.append(func(string, []byte) {})
	}
	h.trimmed = 5
	var s sink
	f := NewFeed(id(2), s.deliver)
	err := f.CatchUp(context.Background(), h.read(nil), JoinHistory, ResumeMax, nil)
	require.ErrorIs(t, err, rooms.ErrResumeGap)
	assert.Empty(t, s.ids)
}

func TestFeedResumeStopsAtMaxThenGoesLive(t *testing.T) {
	h := &history{}
	for range 250 {
		h.append(func(string, []byte) {})
	}
	var s sink
	f := NewFeed(id(1), s.deliver)
	paced := 0
	pace := func(context.Context) error { paced++; return nil }
	require.NoError(t, f.CatchUp(context.Background(), h.read(nil), JoinHistory, 120, pace))
	checkOnceInOrder(t, s.ids, 2, 121)
	assert.Equal(t, 2, paced, "one pace per page of 100")
	h.append(f.Live)
	assert.Equal(t, id(251), s.ids[len(s.ids)-1], "live after the replay")
}

func TestFeedHoldAgainForAGapFill(t *testing.T) {
	h := &history{}
	var s sink
	f := NewFeed("", s.deliver)
	require.NoError(t, f.CatchUp(context.Background(), h.read(nil), JoinHistory, 0, nil))
	h.append(f.Live)
	// the subscription drops: messages are published while nobody listens
	for range 30 {
		h.append(func(string, []byte) {})
	}
	require.True(t, f.Hold())
	assert.False(t, f.Hold(), "a fill is running already")
	h.append(f.Live) // a live one after the resubscribe, before the fill
	require.NoError(t, f.CatchUp(context.Background(), h.read(func() { h.append(f.Live) }), JoinHistory, 0, nil))
	checkOnceInOrder(t, s.ids, 1, len(h.msgs))
}

// TestFeedJoinNeverSkipsWhatArrivedLive is issue #38's skip: a join
// subscribes, says joined, and only then reads "the latest JoinHistory";
// when its node stalls in between (a SIGSTOP, a busy scheduler) and more
// than JoinHistory messages arrive live meanwhile, that read starts after
// messages the receiver was subscribed for. They were held, and dropped as
// older than the page: the receiver got the last 50 of 600. A join knows
// where it went live (LiveAfter) and never moves past that point.
func TestFeedJoinNeverSkipsWhatArrivedLive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before int // messages in the room before the join
	}{
		{"a join of an empty room gets every message sent after it", 0},
		{"a join of a busy room gets every message sent after it", 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &history{}
			for range tc.before {
				h.append(func(string, []byte) {})
			}
			var s sink
			f := NewFeed("", s.deliver)
			since := StreamStart
			if tc.before > 0 {
				since = id(tc.before)
			}
			f.LiveAfter(since) // subscribed: every message after since reaches Live
			// the node stalls before its first read; 600 messages pass
			stalled := false
			hook := func() {
				if !stalled {
					stalled = true
					for range 600 {
						h.append(f.Live)
					}
				}
			}
			require.NoError(t, f.CatchUp(context.Background(), h.read(hook), JoinHistory, ResumeMax, nil))
			h.append(f.Live)
			// more than JoinHistory came after the join: it replays all of
			// them rather than the latest JoinHistory before it
			checkOnceInOrder(t, s.ids, tc.before+1, tc.before+601)
		})
	}
}

// A history trimmed under a long replay, or a replay that reaches its max
// short of where the receiver went live, is a gap the caller is told of
// (then it rewinds and reads the latest): never a silent skip, never a
// message twice.
func TestFeedGapsAreReportedAndRewindDeliversNothingTwice(t *testing.T) {
	t.Run("trimmed under the replay", func(t *testing.T) {
		h := &history{}
		for range 400 {
			h.append(func(string, []byte) {})
		}
		var s sink
		f := NewFeed(id(10), s.deliver)
		f.LiveAfter(id(400))
		reads := 0
		hook := func() {
			if reads++; reads == 2 {
				h.mu.Lock()
				h.trimmed = 300 // ids up to 300 are gone
				h.mu.Unlock()
			}
		}
		err := f.CatchUp(context.Background(), h.read(hook), JoinHistory, ResumeMax, nil)
		require.ErrorIs(t, err, rooms.ErrResumeGap)
		checkOnceInOrder(t, s.ids, 11, 110) // the first page, then the gap
		f.Rewind()
		require.NoError(t, f.CatchUp(context.Background(), h.read(nil), JoinHistory, ResumeMax, nil))
		h.append(f.Live)
		got := s.ids[100:]
		checkOnceInOrder(t, got, 401-JoinHistory, 401)
	})
	t.Run("max reached short of where the receiver went live", func(t *testing.T) {
		h := &history{}
		for range 300 {
			h.append(func(string, []byte) {})
		}
		var s sink
		f := NewFeed(id(1), s.deliver)
		f.LiveAfter(id(300))
		err := f.CatchUp(context.Background(), h.read(nil), JoinHistory, 120, nil)
		require.ErrorIs(t, err, rooms.ErrResumeGap, "messages 122 to 300 would be skipped")
		checkOnceInOrder(t, s.ids, 2, 121)
		f.Rewind()
		require.NoError(t, f.CatchUp(context.Background(), h.read(nil), JoinHistory, 120, nil))
		checkOnceInOrder(t, s.ids[120:], 301-JoinHistory, 300)
	})
}
