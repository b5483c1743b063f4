// Package wsframe writes server WebSocket frames by hand (RFC 6455 § 5.2:
// FIN set, not masked), so that a writer can put everything queued for a
// client into one buffer and send it in one write system call with one
// deadline — chatd's transport (web's wsConn) and chatbench's coalescing
// bare hub, which must frame exactly as chatd does to be its limit.
// Writing each event with the library's WriteMessage costs a system call
// and a deadline per event.
package wsframe

import "encoding/binary"

// The opcodes this package writes.
const (
	Text  = 1
	Close = 8
	Ping  = 9
	Pong  = 10
)

// MaxBatch is the most bytes AppendEvents puts in one batched frame.
const MaxBatch = 64 << 10

// AppendHeader appends the header of a server frame of opcode op with an
// n-byte payload.
func AppendHeader(b []byte, op, n int) []byte {
	b = append(b, 0x80|byte(op))
	switch {
	case n < 126:
		b = append(b, byte(n))
	case n <= 0xFFFF:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return b
}

// AppendEvents frames events as text frames onto b: one frame per event,
// or (batch) consecutive events joined by '\n' in one frame of at most
// MaxBatch bytes (an event longer than that gets a frame alone).
func AppendEvents(b []byte, events [][]byte, batch bool) []byte {
	if !batch {
		for _, e := range events {
			b = AppendHeader(b, Text, len(e))
			b = append(b, e...)
		}
		return b
	}
	for i := 0; i < len(events); {
		size, j := len(events[i]), i+1
		for j < len(events) && size+1+len(events[j]) <= MaxBatch {
			size += 1 + len(events[j])
			j++
		}
		b = AppendHeader(b, Text, size)
		for k := i; k < j; k++ {
			if k > i {
				b = append(b, '\n')
			}
			b = append(b, events[k]...)
		}
		i = j
	}
	return b
}

// AppendClose appends a close frame with code and reason, the reason
// clipped to 123 bytes (a control frame's payload is at most 125).
func AppendClose(b []byte, code int, reason string) []byte {
	if len(reason) > 123 {
		reason = reason[:123]
	}
	b = AppendHeader(b, Close, 2+len(reason))
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	return append(b, reason...)
}
