package rooms

import (
	"encoding/json"
	"fmt"
)

// Event types and presence states.
const (
	EventMessage  = "message"
	EventPresence = "presence"
	StateJoined   = "joined"
	StateLeft     = "left"
)

// Event is what the seat and message scripts publish on a room's channel:
// JSON exactly as the WebSocket server→client frames of docs/PROTOCOL.md, so a
// node forwards the payload to its local members verbatim:
//
//	{"type":"message","message":{"id":"…","room":"…","from":"…","text":"…","ts":"…"}}
//	{"type":"presence","room":"general-3","user":"alice","state":"joined"}
//
// "joined" is published for a new seat only (not for a rejoin of a seated
// user); "left" for a Leave, and for each expired seat reaped.
type Event struct {
	Type    string   `json:"type"`
	Message *Message `json:"message,omitempty"`
	Room    string   `json:"room,omitempty"`
	User    string   `json:"user,omitempty"`
	State   string   `json:"state,omitempty"`
}

// DecodeEvent decodes a payload of a room's channel. It returns ErrBadEvent
// for anything but a complete message or presence event.
func DecodeEvent(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	switch {
	case e.Type == EventMessage && e.Message != nil && e.Message.ID != "" && e.Message.Room != "":
		return e, nil
	case e.Type == EventPresence && e.Room != "" && e.User != "" && (e.State == StateJoined || e.State == StateLeft):
		return e, nil
	}
	return Event{}, fmt.Errorf("%w: %.80q", ErrBadEvent, b)
}
