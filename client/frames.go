package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/chatd/chatd/errcode"
)

// The wire format of docs/ws-frames.schema.json. A server frame holds one
// JSON event, or on a batch=1 connection several separated by '\n'; the
// decoder always splits on '\n', which is harmless for a one-event frame
// (JSON escapes newlines inside strings). Every event is checked for the
// fields its type requires, so that the connection logic never acts on a
// half-formed event: a bad one is reported (BadFrameEvent) and skipped.

// wireEvent is any server → client event as sent.
type wireEvent struct {
	Type    string          `json:"type"`
	User    string          `json:"user"`
	Node    string          `json:"node"`
	Motd    string          `json:"motd"`
	Ref     string          `json:"ref"`
	ID      string          `json:"id"`
	Code    string          `json:"code"`
	Key     string          `json:"key"`
	Value   any             `json:"value"`
	Version int64           `json:"version"`
	State   string          `json:"state"`
	Text    string          `json:"text"`
	Room    json.RawMessage `json:"room"`    // a Room object in joined, a room id string elsewhere
	Message json.RawMessage `json:"message"` // a Message object in message, a sentence in error
}

// inEvent is a decoded, checked server event.
type inEvent struct {
	typ     string
	user    string
	node    string
	motd    string
	ref     string
	id      string
	code    string
	text    string // error message, notice text
	key     string
	value   any
	version int64
	state   string
	roomID  string
	room    Room    // joined
	msg     Message // message
}

// maxEventLine bounds one event's text in a BadFrameEvent.
const maxEventLine = 200

// decoded is one line of a frame: an event, or why it is not one.
type decoded struct {
	ev   inEvent
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
		ev, err := decodeEvent(line)
		d := decoded{ev: ev, err: err}
		if err != nil {
			d.line = line
		}
		out = append(out, d)
	}
	return out
}

// decodeEvent decodes and checks one event.
func decodeEvent(line []byte) (inEvent, error) {
	if !utf8.Valid(line) {
		return inEvent{}, errors.New("not UTF-8")
	}
	var w wireEvent
	if err := json.Unmarshal(line, &w); err != nil {
		return inEvent{}, err
	}
	ev := inEvent{typ: w.Type, user: w.User, node: w.Node, motd: w.Motd, ref: w.Ref, id: w.ID,
		code: w.Code, key: w.Key, value: w.Value, version: w.Version, state: w.State, text: w.Text}
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%s event without %s", w.Type, what)
		}
		return nil
	}
	var err error
	switch w.Type {
	case "":
		return ev, errors.New(`event without "type"`)
	case "hello":
		err = need(w.User != "", "user")
	case "joined":
		if err = strictObject(w.Room, &ev.room); err == nil {
			err = need(ev.room.ID != "", "room.id")
			ev.roomID = ev.room.ID
		}
	case "message":
		if err = strictObject(w.Message, &ev.msg); err == nil {
			err = need(ev.msg.ID != "" && ev.msg.Room != "", "message.id and message.room")
			ev.id, ev.roomID = ev.msg.ID, ev.msg.Room
		}
	case "ack":
		if ev.roomID, err = roomString(w.Room); err == nil {
			err = need(w.Ref != "" && w.ID != "", "ref and id")
		}
	case "presence", "typing":
		if ev.roomID, err = roomString(w.Room); err == nil {
			err = need(ev.roomID != "" && w.User != "", "room and user")
		}
	case "message_removed":
		if ev.roomID, err = roomString(w.Room); err == nil {
			err = need(ev.roomID != "" && w.ID != "", "room and id")
		}
	case "left":
		if ev.roomID, err = roomString(w.Room); err == nil {
			err = need(ev.roomID != "", "room")
		}
	case "settings":
		err = need(w.Key != "", "key")
	case "notice":
		err = need(w.ID != "", "id")
	case "error":
		if ev.roomID, err = roomString(w.Room); err == nil {
			if len(w.Message) > 0 && string(w.Message) != "null" {
				err = json.Unmarshal(w.Message, &ev.text)
			}
			if err == nil {
				err = need(w.Code != "", "code")
			}
		}
	}
	// other types (added to the protocol later) pass through unchecked
	return ev, err
}

// strictObject decodes a JSON object into v; null or absent is an error.
func strictObject(p json.RawMessage, v any) error {
	if len(p) == 0 || p[0] != '{' {
		return errors.New("expected a JSON object")
	}
	return json.Unmarshal(p, v)
}

// roomString decodes an optional room id string.
func roomString(p json.RawMessage) (string, error) {
	if len(p) == 0 || string(p) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(p, &s); err != nil {
		return "", errors.New(`"room" is not a string`)
	}
	return s, nil
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

// outFrame is a client → server frame.
type outFrame struct {
	Type  string `json:"type"`
	Lobby string `json:"lobby,omitempty"`
	Room  string `json:"room,omitempty"`
	Text  string `json:"text,omitempty"`
	ID    string `json:"id,omitempty"`
	After string `json:"after,omitempty"`
	Ref   string `json:"ref,omitempty"`
}

// maxClientFrame is the largest frame the server takes (a larger one
// closes the connection with 1009).
const maxClientFrame = 64 << 10

var pingFrame = []byte(`{"type":"ping"}`)

func encodeFrame(f outFrame) ([]byte, error) {
	p, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	if len(p) > maxClientFrame {
		return nil, &Error{Code: errcode.TooLarge, Op: f.Type, Message: fmt.Sprintf("the frame would be %d bytes; the server takes at most %d", len(p), maxClientFrame)}
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
