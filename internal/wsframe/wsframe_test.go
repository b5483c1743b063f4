package wsframe

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frame is one parsed server frame.
type frame struct {
	op      int
	payload []byte
}

// parse reads the frames of b as a client would (RFC 6455 § 5.2), failing
// on anything AppendHeader should not produce.
func parse(t *testing.T, b []byte) []frame {
	t.Helper()
	var out []frame
	for len(b) > 0 {
		require.GreaterOrEqual(t, len(b), 2)
		require.Equal(t, byte(0x80), b[0]&0xF0, "FIN set, no RSV bits")
		require.Zero(t, b[1]&0x80, "a server frame is not masked")
		op, n, h := int(b[0]&0x0F), int(b[1]&0x7F), 2
		switch n {
		case 126:
			n, h = int(binary.BigEndian.Uint16(b[2:4])), 4
			require.GreaterOrEqual(t, n, 126, "the shortest length form")
		case 127:
			n, h = int(binary.BigEndian.Uint64(b[2:10])), 10
			require.Greater(t, n, 0xFFFF, "the shortest length form")
		}
		require.GreaterOrEqual(t, len(b), h+n)
		out = append(out, frame{op, b[h : h+n]})
		b = b[h+n:]
	}
	return out
}

func TestAppendHeaderLengths(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 127, 0xFFFF, 0x10000, 1 << 20} {
		p := bytes.Repeat([]byte{'x'}, n)
		fs := parse(t, append(AppendHeader(nil, Text, n), p...))
		require.Len(t, fs, 1, "length %d", n)
		assert.Equal(t, Text, fs[0].op)
		assert.Len(t, fs[0].payload, n)
	}
}

func TestAppendEvents(t *testing.T) {
	big := strings.Repeat("y", MaxBatch+10)
	mid := strings.Repeat("z", MaxBatch/2)
	events := [][]byte{[]byte("a"), []byte("b"), []byte(mid), []byte(mid), []byte(big), []byte("c")}

	t.Run("one frame per event", func(t *testing.T) {
		fs := parse(t, AppendEvents(nil, events, false))
		require.Len(t, fs, len(events))
		for i, f := range fs {
			assert.Equal(t, events[i], f.payload)
		}
	})
	t.Run("batched: newline-joined up to MaxBatch, a longer event alone, order kept", func(t *testing.T) {
		fs := parse(t, AppendEvents(nil, events, true))
		var got [][]byte
		for _, f := range fs {
			assert.Equal(t, Text, f.op)
			if len(f.payload) > MaxBatch {
				assert.Equal(t, big, string(f.payload), "only an event longer than MaxBatch exceeds it, alone")
			}
			got = append(got, bytes.Split(f.payload, []byte("\n"))...)
		}
		assert.Equal(t, events, got)
		assert.Len(t, fs, 4, "[a b mid] [mid] [big] [c]")
	})
}

func TestAppendClose(t *testing.T) {
	fs := parse(t, AppendClose(nil, 1013, "send queue full"))
	require.Len(t, fs, 1)
	assert.Equal(t, Close, fs[0].op)
	assert.Equal(t, uint16(1013), binary.BigEndian.Uint16(fs[0].payload))
	assert.Equal(t, "send queue full", string(fs[0].payload[2:]))

	fs = parse(t, AppendClose(nil, 4001, strings.Repeat("r", 300)))
	assert.Len(t, fs[0].payload, 125, "a control frame holds at most 125 bytes")
}
