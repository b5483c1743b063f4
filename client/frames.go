package client

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
)

// The wire format of docs/ws-frames.schema.json, as the protocol package
// types it. A server frame holds one JSON event, or on a batch=1
// connection several separated by '\n'; the decoder always splits on
// '\n', which is harmless for a one-event frame (JSON escapes newlines
// inside strings). Every event is checked for the fields its type
// requires (protocol.DecodeEvent), so that the connection logic never
// acts on a half-formed event: a bad one is reported (BadFrameEvent) and
// skipped.

// maxEventLine bounds one event's text in a BadFrameEvent.
const maxEventLine = 200

// decoded is one line of a frame: an event, or why it is not one.
type decoded struct {
	ev   protocol.ServerEvent
	err  error
	line []byte // the line, for a bad one
}

// decodeFrame splits a server frame into events and decodes each. It
// never panics and never fails as a whole: each bad line is its own
// decoded with err set.
func decodeFrame(p []byte) []decoded {
	var out []decoded
	for len(p) > 0 {
		line := p
		if i := bytes.IndexByte(p, '\n'); i >= 0 {
			line, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := protocol.DecodeEvent(line)
		d := decoded{ev: ev, err: err}
		if err != nil {
			d.line = line
		}
		out = append(out, d)
	}
	return out
}

// compareIDs orders two message ids of one room: -1, 0 or +1. Ids are
// "ms-seq", padded or not; they are compared as numbers. An id that does
// not parse sorts before every id that does, so it never hides a real
// message as a duplicate.
func compareIDs(a, b string) int {
	am, as, aok := splitID(a)
	bm, bs, bok := splitID(b)
	switch {
	case !aok && !bok:
		return strings.Compare(a, b)
	case !aok:
		return -1
	case !bok:
		return 1
	case am != bm:
		return cmpUint(am, bm)
	}
	return cmpUint(as, bs)
}

func splitID(id string) (ms, seq uint64, ok bool) {
	m, s, found := strings.Cut(id, "-")
	if !found {
		return 0, 0, false
	}
	var err1, err2 error
	ms, err1 = strconv.ParseUint(m, 10, 64)
	seq, err2 = strconv.ParseUint(s, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var pingFrame = []byte(`{"type":"ping"}`)

// encodeFrame encodes f (protocol.EncodeFrame); a frame over the server's
// limit is ErrTooLarge, refused before it is sent.
func encodeFrame(f protocol.ClientFrame) ([]byte, error) {
	p, err := protocol.EncodeFrame(f)
	if err != nil {
		return nil, &Error{Code: errcode.Of(err), Op: f.FrameType(), Message: errcode.Message(err)}
	}
	return p, nil
}

// clipLine is a bad line for a BadFrameEvent, at most maxEventLine bytes.
func clipLine(p []byte) string {
	if len(p) > maxEventLine {
		p = p[:maxEventLine]
	}
	return strconv.Quote(string(p))
}
