package rooms

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzSplitEvent holds eventStart and eventAfterID, which write a message
// event by hand, to what json.Marshal writes for the same Event: texts
// with quotes, backslashes, control bytes, HTML's <, > and &, U+2028,
// invalid UTF-8, and any time.
func FuzzSplitEvent(f *testing.F) {
	for _, s := range []string{"hello, world", `"quoted" \ back\slash`, "\x00\x01\b\f\n\r\t\x1f\x7f", "<b>&amp;</b>",
		"\u2028\u2029", "\xff\xfe ok \xc3", "é😀", "", "a\u00a0b"} {
		f.Add("general-3", "alice", s, int64(1764504000123))
	}
	f.Add("", "", "", int64(0))
	f.Add("r<1>", "b&b", "x", int64(-62135596800000))
	f.Fuzz(func(t *testing.T, room, from, text string, ms int64) {
		m := Message{Room: room, From: from, Text: text, TS: time.UnixMilli(ms)}
		want, err := json.Marshal(Event{Type: EventMessage, Message: &m})
		if err != nil {
			t.Skip("json.Marshal refuses it (a year outside 0–9999)")
		}
		if got := eventStart + eventAfterID(m); got != string(want) {
			t.Fatalf("eventStart and eventAfterID wrote\n%s\njson.Marshal\n%s", got, want)
		}
	})
}

// BenchmarkSplitEvent is the encoding of a say's event, once a say.
func BenchmarkSplitEvent(b *testing.B) {
	m := Message{Room: "general-3", From: "alice", Text: "fb 1 17 204 1764504000123456789 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", TS: time.UnixMilli(1764504000123)}
	b.ReportAllocs()
	for b.Loop() {
		_ = eventAfterID(m)
	}
}
