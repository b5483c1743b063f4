package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serverFrame is one frame as a server writes it: unmasked (or masked with
// key, when given).
func serverFrame(fin bool, op byte, p []byte, key ...byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	m := byte(0)
	if len(key) == 4 {
		m = 0x80
	}
	switch n := len(p); {
	case n < 126:
		b = append(b, m|byte(n))
	case n <= 0xffff:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if m != 0 {
		b = append(b, key...)
		at := len(b)
		b = append(b, p...)
		unmask(b[at:], key, 0)
		return b
	}
	return append(b, p...)
}

// chunked hands out its data at most n bytes per Read: frames split across
// reads at every possible point.
type chunked struct {
	data []byte
	n    int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), c.n, len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

// wsOver is a WS that reads stream in chunks of n bytes and records pings.
func wsOver(stream []byte, n int, pings *[]string) *WS {
	w := &WS{}
	w.fr = frameReader{br: bufio.NewReaderSize(&chunked{data: stream, n: n}, 16), onPing: func(p []byte) error {
		*pings = append(*pings, string(p))
		return nil
	}}
	return w
}

// events reads events until an error and returns them with that error.
func events(w *WS) ([]string, error) {
	var out []string
	for {
		ev, err := w.NextEvent()
		if err != nil {
			return out, err
		}
		out = append(out, string(ev))
	}
}

func TestFrameReader(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("b", 70000)
	mid := strings.Repeat("m", 300)
	var stream []byte
	stream = append(stream, serverFrame(true, opText, []byte(`{"type":"message","n":1}`))...)              // one event
	stream = append(stream, serverFrame(true, opText, []byte("{\"n\":2}\n{\"n\":3}\r\n\n{\"n\":4}\n"))...) // batched, blank line, CRLF, trailing newline
	stream = append(stream, serverFrame(false, opText, []byte(`{"n":`))...)                                // fragmented…
	stream = append(stream, serverFrame(true, opPing, []byte("are you there"))...)                         // …a ping in between…
	stream = append(stream, serverFrame(false, opCont, []byte("5}\n{\"n\""))...)
	stream = append(stream, serverFrame(true, opCont, []byte(":6}"))...) // …an event split across fragments
	stream = append(stream, serverFrame(true, opPong, nil)...)
	stream = append(stream, serverFrame(true, opText, []byte(mid))...)                   // 16-bit length
	stream = append(stream, serverFrame(true, opText, []byte(big))...)                   // 64-bit length
	stream = append(stream, serverFrame(true, opText, []byte(`{"n":7}`), 1, 2, 3, 4)...) // masked
	stream = append(stream, serverFrame(true, opClose, append([]byte{0x03, 0xf5}, "try later"...))...)
	want := []string{`{"type":"message","n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`, `{"n":6}`, mid, big, `{"n":7}`}

	for _, n := range []int{1, 2, 3, 7, 64, 1 << 20} {
		var pings []string
		got, err := events(wsOver(stream, n, &pings))
		assert.Equal(t, want, got, "reads of %d bytes", n)
		var ce *CloseError
		require.ErrorAs(t, err, &ce, "reads of %d bytes", n)
		assert.Equal(t, 1013, ce.Code)
		assert.Equal(t, "try later", ce.Reason)
		assert.ErrorIs(t, err, errClosed)
		assert.Equal(t, []string{"are you there"}, pings)
	}

	t.Run("a stream cut inside a frame is an unexpected EOF", func(t *testing.T) {
		f := serverFrame(true, opText, []byte(`{"n":1}`))
		for cut := 1; cut < len(f); cut++ {
			var pings []string
			_, err := events(wsOver(f[:cut], 1, &pings))
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut at %d", cut)
		}
		var pings []string
		_, err := events(wsOver(f, 3, &pings))
		assert.ErrorIs(t, err, io.EOF, "a clean end between frames")
	})
	for name, bad := range map[string][]byte{
		"a continuation with nothing to continue": serverFrame(true, opCont, []byte("x")),
		"a new message inside a fragmented one":   append(serverFrame(false, opText, []byte("x")), serverFrame(true, opText, []byte("y"))...),
		"an unknown opcode":                       serverFrame(true, 0x3, nil),
		"reserved bits":                           {0xC1, 0x00},
		"a control frame over 125 bytes":          serverFrame(true, opPing, bytes.Repeat([]byte("p"), 126)),
		"a fragmented control frame":              serverFrame(false, opPing, nil),
		"a frame over the limit":                  {0x81, 127, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name+" is an error", func(t *testing.T) {
			var pings []string
			_, err := events(wsOver(bad, 2, &pings))
			require.Error(t, err)
			assert.NotErrorIs(t, err, io.EOF)
		})
	}
}

// FuzzFrameReader: any byte stream is read without a panic or a hang; a
// message fragmented at any point, with a ping between its fragments and
// read in chunks of any size, comes back whole, and its events are its
// non-empty lines.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte(`{"type":"message"}`), uint16(3))
	f.Add([]byte("{\"a\":1}\n{\"b\":2}\n"), uint16(0))
	f.Add(serverFrame(true, opText, []byte("x\ny")), uint16(1))
	f.Add(bytes.Repeat([]byte("z"), 300), uint16(200))
	f.Add([]byte{}, uint16(72))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		chunk := int(cut%17) + 1
		var pings []string
		_, _ = events(wsOver(data, chunk, &pings)) // raw bytes as a stream

		at := int(cut) % (len(data) + 1)
		var s []byte
		s = append(s, serverFrame(false, opText, data[:at])...)
		s = append(s, serverFrame(true, opPing, []byte("p"))...)
		s = append(s, serverFrame(true, opCont, data[at:])...)
		s = append(s, serverFrame(true, opBin, data, 9, 8, 7, 6)...)
		w := wsOver(s, chunk, &pings)
		for range 2 {
			p, err := w.fr.Next()
			require.NoError(t, err)
			require.True(t, bytes.Equal(data, p), "%q came back as %q", data, p)
		}
		_, err := w.fr.Next()
		require.ErrorIs(t, err, io.EOF)

		var want []string
		for _, l := range strings.Split(string(data), "\n") {
			if l = strings.TrimSuffix(l, "\r"); l != "" {
				want = append(want, l)
			}
		}
		got, err := events(wsOver(serverFrame(true, opText, data), chunk, &pings))
		require.ErrorIs(t, err, io.EOF)
		require.Equal(t, want, got)
	})
}

func TestScan(t *testing.T) {
	t.Parallel()
	hubMsg := []byte(`{"message":{"id":"0001-h1-1","room":"fo-a-1","from":"u1","text":"fb 1 12 345 1767225600123456789 xxxx","ts":"2026-01-01T00:00:00.000Z"},"type":"message"}`)
	chatdMsg := []byte(`{"type":"message","message":{"id":"0001","room":"fo-a-1","from":"u\"1","text":"fb 0 3 0 99 xx","ts":"t"}}`)
	assert.Equal(t, "message", string(eventType(hubMsg)), "type after the message object")
	assert.Equal(t, "message", string(eventType(chatdMsg)))
	assert.Equal(t, "ack", string(eventType([]byte(`{ "type" : "ack", "ref":"p1-2-3"}`))))
	assert.Nil(t, eventType([]byte(`{"types":"x","typ":"y"}`)))
	assert.Equal(t, `u\"1`, string(strField(chatdMsg, "from")), "escapes are skipped, not ended on")

	m, ok := parseFanText(hubMsg)
	require.True(t, ok)
	assert.Equal(t, fanText{phase: 1, sender: 12, seq: 345, ns: 1767225600123456789}, m)
	m, ok = parseFanText(chatdMsg)
	require.True(t, ok)
	assert.Equal(t, fanText{phase: 0, sender: 3, seq: 0, ns: 99}, m)
	for _, bad := range []string{`{"text":"hello"}`, `{"text":"fb 1 2"}`, `{"text":"fb x 2 3 4"}`, `{"text":"fb 1 2 3 99999999999999999999"}`, `{"type":"message"}`} {
		_, ok := parseFanText([]byte(bad))
		assert.False(t, ok, bad)
	}
	ph, seq, ns, ok := parseRef([]byte(`{"type":"ack","ref":"p1-42-1767225600123456789","id":"x"}`))
	require.True(t, ok)
	assert.Equal(t, []int64{1, 42, 1767225600123456789}, []int64{int64(ph), int64(seq), ns})
	_, _, _, ok = parseRef([]byte(`{"type":"ack","ref":"r1"}`))
	assert.False(t, ok)
}

// TestSay: a say built by hand is valid JSON, a masked text frame whose
// text is 100 bytes and carries what the reader parses back.
func TestSay(t *testing.T) {
	t.Parallel()
	cl, sv := net.Pipe()
	defer cl.Close()
	defer sv.Close()
	c := &fanClient{i: 17, ws: &WS{conn: cl}, room: "fo-x-1"}
	errc := make(chan error, 1)
	go func() { errc <- c.say(1, 9, 0) }()
	fr := frameReader{br: bufio.NewReader(sv)}
	p, err := fr.Next()
	require.NoError(t, err)
	require.NoError(t, <-errc)
	var say struct{ Type, Room, Text, Ref string }
	require.NoError(t, json.Unmarshal(p, &say))
	assert.Equal(t, "say", say.Type)
	assert.Equal(t, "fo-x-1", say.Room)
	assert.Len(t, say.Text, 100)
	msg, _ := json.Marshal(map[string]any{"type": "message", "message": map[string]string{"text": say.Text}})
	m, ok := parseFanText(msg)
	require.True(t, ok)
	assert.Equal(t, 1, m.phase)
	assert.Equal(t, 17, m.sender)
	assert.Equal(t, 9, m.seq)
	ph, seq, ns, ok := parseRef(p)
	require.True(t, ok)
	assert.Equal(t, []int64{1, 9, m.ns}, []int64{int64(ph), int64(seq), ns})
	assert.EqualValues(t, 1, c.sent.Load())
}

func TestOrderCheck(t *testing.T) {
	t.Parallel()
	c := &fanClient{}
	for _, x := range [][2]int{{1, 0}, {2, 0}, {1, 1}, {1, 3}, {2, 1}, {1, 3}, {1, 2}, {2, 5}} {
		c.order(x[0], x[1])
	}
	assert.EqualValues(t, 1, c.dups.Load(), "1:3 twice")
	assert.EqualValues(t, 1, c.disorder.Load(), "1:2 after 1:3")
}

func TestParseStatTicks(t *testing.T) {
	t.Parallel()
	line := []byte("4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 31 0 0 20 0 9 0 100 0 0\n")
	n, err := parseStatTicks(line)
	require.NoError(t, err)
	assert.EqualValues(t, 281, n)
	_, err = parseStatTicks([]byte("4242 (x) S 1 2"))
	assert.Error(t, err)
	self, err := cpuTicks(0)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, self, int64(0))
	_, err = cpuTicks(1 << 30)
	assert.Error(t, err, "no such process")
}

func TestParseSysCounts(t *testing.T) {
	t.Parallel()
	ioText := []byte("rchar: 100\nwchar: 200\nsyscr: 31\nsyscw: 47\nread_bytes: 0\n")
	st := []byte("Name:\tredis-server\nThreads:\t5\nvoluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t99\n")
	c, err := parseSysCounts(ioText, st)
	require.NoError(t, err)
	assert.Equal(t, sysCounts{reads: 31, writes: 47, wakeups: 1234}, c)
	_, err = parseSysCounts(ioText, []byte("Name:\tx\n"))
	assert.Error(t, err, "no voluntary_ctxt_switches")
	_, err = parseSysCounts([]byte("syscr: x\n"), st)
	assert.Error(t, err)
	self, err := readSysCounts(os.Getpid())
	require.NoError(t, err)
	assert.Positive(t, self.reads+self.writes, "this test read files")
}

func TestUsageAndGoals(t *testing.T) {
	t.Parallel()
	t.Run("-h shows examples but not the internal flags, which still work", func(t *testing.T) {
		var out bytes.Buffer
		_, err := ParseFlags([]string{"-h"}, &out)
		require.ErrorIs(t, err, flag.ErrHelp)
		assert.Contains(t, out.String(), "usage: chatbench")
		assert.Contains(t, out.String(), "-scenarios anchorcheck")
		assert.Contains(t, out.String(), "-strict")
		assert.NotContains(t, out.String(), "serve-hub")
		assert.NotContains(t, out.String(), "hub-redis")
		o, err := ParseFlags([]string{"-serve-hub", "127.0.0.1:1", "-hub-redis", "127.0.0.1:2", "-hub-node", "h9"}, &out)
		require.NoError(t, err)
		assert.Equal(t, []string{"127.0.0.1:1", "127.0.0.1:2", "h9"}, []string{o.serveHub, o.hubRedis, o.hubNode})
	})
	t.Run("the closing summary lists goals missed and met", func(t *testing.T) {
		rp := &Report{Machine: map[string]string{}}
		rp.add(newRow("fan", "chatd×1", "msg/s", []float64{50}).vs("A4", []float64{100}).goalRatio(true, 0.6))
		rp.add(newRow("fan", "p99", "ms", []float64{1}).vs("A4", []float64{1}).goalRatio(false, 1.5))
		rp.check("fan", "zero loss", true, "ok")
		var tb bytes.Buffer
		rp.WriteTable(&tb)
		assert.Equal(t, 1, rp.Missed())
		assert.Contains(t, tb.String(), "## Goals: 2 met, 1 missed")
		assert.Contains(t, tb.String(), "- MISSED: fan: chatd×1 — want ratio ≥ 0.6, got ratio 0.5 (50.0 vs 100 msg/s)")
		assert.Contains(t, tb.String(), "- met:    fan: zero loss")
		rp.fail("x", errors.New("boom"))
		rp.summarize()
		assert.Equal(t, 2, rp.Missed(), "an error is a missed goal")
	})
}
