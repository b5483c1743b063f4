package moderation

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/chatd/chatd/names"
)

// Event is one moderation action, as published on Channel (JSON):
//
//	{"type":"ban","user":"bob","until":"2026-12-01T12:00:00Z","reason":"spam"}
//
// Type is "kick", "ban", "mute", "unmute" or "unban". User is the
// canonical name (names.Canonical): match connections by the canonical form
// of their user, so that a ban of "bob" closes "Bob". A node that receives
// "kick" closes user's WebSockets with 4001 and "ban" with 4003 (the
// reason as the close text); "mute", "unmute" and "unban" need no action
// unless the node caches Check results, which it must then drop for user.
type Event struct {
	Type   string    `json:"type"`
	User   string    `json:"user"`
	Until  time.Time `json:"until,omitzero"` // "ban" and "mute" only
	Reason string    `json:"reason,omitempty"`
}

// DecodeEvent decodes an Event published on Channel, its User in canonical
// form (also from a publisher that sent another case). It returns
// ErrBadEvent for anything else: not JSON, an unknown type, a malformed
// user.
func DecodeEvent(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	switch e.Type {
	case "kick", "ban", "mute", "unmute", "unban":
	default:
		return Event{}, fmt.Errorf("%w: type %q", ErrBadEvent, e.Type)
	}
	if err := names.User(e.User); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	e.User = names.Canonical(e.User)
	return e, nil
}
