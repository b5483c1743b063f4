package client

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/protocol"
)

func TestCompareIDs(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1796114764962-000001", "1796114764962-000002", -1},
		{"1796114764962-1", "1796114764962-000001", 0},
		{"1796114764962-10", "1796114764962-9", 1},
		{"999-5", "1000-0", -1},
		{"junk", "1-1", -1},
		{"1-1", "junk", 1},
		{"", "", 0},
	} {
		assert.Equal(t, tc.want, compareIDs(tc.a, tc.b), "%s vs %s", tc.a, tc.b)
	}
}

func TestDecodeFrameSplitsBatches(t *testing.T) {
	ds := decodeFrame([]byte("{\"type\":\"pong\"}\r\n\n{\"type\":\"notice\",\"id\":\"1\",\"text\":\"a\\nb\"}\n"))
	if assert.Len(t, ds, 2) {
		assert.Equal(t, protocol.Pong{Type: "pong"}, ds[0].ev)
		assert.Equal(t, "a\nb", ds[1].ev.(protocol.Notice).Text, "an escaped newline stays inside its event")
	}
}

// FuzzDecodeFrame: any bytes decode without a panic; every event that
// decodes has the fields the connection logic relies on.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","user":"u","node":"n","motd":""}`,
		`{"type":"joined","room":{"id":"r-1","lobby":"r","seq":1,"capacity":50,"members":["u"]}}`,
		`{"type":"message","message":{"id":"1796114764962-000001","room":"r-1","from":"u","text":"hi","ts":"2026-12-01T11:01:25.123Z"}}`,
		`{"type":"ack","ref":"a.s1","id":"1796114764962-000001","room":"r-1"}`,
		`{"type":"error","code":"not_seated","message":"no","room":"r-1","ref":"a.s2"}`,
		"{\"type\":\"pong\"}\n{\"type\":\"typing\",\"room\":\"r-1\",\"user\":\"b\"}",
		`{"type":"settings","key":"motd","value":"x","version":3}`,
		`{"type":"message","message":"oops"}`,
		"\xff",
		strings.Repeat("[", 40),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		for _, d := range decodeFrame(p) {
			if d.err != nil {
				_ = clipLine(d.line)
				continue
			}
			switch ev := d.ev.(type) {
			case protocol.Unknown:
				if ev.Type == "" {
					t.Fatalf("an event without a type decoded: %q", p)
				}
			case protocol.Joined:
				if ev.Room.ID == "" {
					t.Fatalf("joined without a room id: %q", p)
				}
			case protocol.MessageEvent:
				if ev.Message.ID == "" || ev.Message.Room == "" {
					t.Fatalf("message without id or room: %q", p)
				}
				_ = compareIDs(ev.Message.ID, "1-1")
			case protocol.Ack:
				if ev.ID == "" {
					t.Fatalf("ack without id: %q", p)
				}
			case protocol.ErrorEvent:
				if ev.Code == "" {
					t.Fatalf("error without code: %q", p)
				}
			}
		}
	})
}

// BenchmarkDecodeFrame decodes a batched frame of 50 message events: the
// cost of receiving, per event (b.N counts frames; see events/s).
func BenchmarkDecodeFrame(b *testing.B) {
	var sb strings.Builder
	for i := range 50 {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(`{"type":"message","message":{"id":"1796114764962-0000` + string(rune('0'+i/10)) + string(rune('0'+i%10)) +
			`","room":"general-3","from":"alice","text":"a chat message of a usual length, some forty characters","ts":"2026-12-01T11:01:25.123Z"}}`)
	}
	p := []byte(sb.String())
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if ds := decodeFrame(p); len(ds) != 50 || ds[49].err != nil {
			b.Fatal(ds[49].err)
		}
	}
	b.ReportMetric(float64(50*b.N)/b.Elapsed().Seconds(), "events/s")
}
