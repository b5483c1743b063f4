package realtime

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chatd/chatd/internal/bus"
)

// countingTransport takes every write and counts its events.
type countingTransport struct{ n *atomic.Int64 }

func (t countingTransport) Write(events [][]byte) error {
	t.n.Add(int64(len(events)))
	return nil
}
func (countingTransport) Ping() error       { return nil }
func (countingTransport) Close(int, string) {}

// BenchmarkFanOut is the node's fan-out of room messages, from the bus
// handler of each room's channel to every member's transport: 40 rooms of
// 50 local members (issue #42's rooms of 50), one message per op to the
// next room in turn, 50 deliveries per op. The op ends when the member
// writers have written every event, so ns/op and allocs/op cover the
// room's feed, the members' feeds, their queues and writers.
func BenchmarkFanOut(b *testing.B) {
	const nRooms, members = 40, 50
	th := newTestHub(b)
	var written atomic.Int64
	hs := make([]bus.Handler, nRooms)
	for r := range nRooms {
		room := fmt.Sprintf("bench-%d", r+1)
		for i := range members {
			th.join(b, room, fmt.Sprintf("u%d-%d", r, i), countingTransport{&written}, nil)
		}
		hs[r] = th.handlers[room]
	}
	frames := make([][]byte, 1<<12)
	for i := range frames {
		frames[i] = fmt.Appendf(nil, `{"type":"message","message":{"id":"1764504000123-%06d","room":"bench","from":"alice","text":"hello, world","ts":"2026-11-30T12:00:00.123Z"}}`, i+1)
	}
	sent := 0
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		// ids increase per room: message k of the run goes to room k % nRooms
		// with id k / nRooms + 1
		hs[sent%nRooms].Receive("", frames[(sent/nRooms)%len(frames)])
		sent++
		if sent/nRooms >= len(frames) {
			b.Fatal("raise len(frames) or lower -benchtime")
		}
	}
	for written.Load() < int64(sent*members) {
		time.Sleep(50 * time.Microsecond)
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(sent*members), "ns/delivery")
}
