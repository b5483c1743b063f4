package protocol

import "fmt"

// Direct messages (docs/PROTOCOL.md, "Direct messages"): the client frames
// address a conversation by To, the other user's name or the
// conversation's id; the server events name it by its id.

// The direct-message client frame types.
const (
	TypeDMOpen   = "dm_open"
	TypeDMSend   = "dm_send"
	TypeDMTyping = "dm_typing"
	TypeDMRead   = "dm_read"
	TypeDMResume = "dm_resume"
)

// The direct-message server event types.
const (
	TypeDM         = "dm"
	TypeDMOpened   = "dm_opened"
	TypeDMSent     = "dm_sent"
	TypeDMResumed  = "dm_resumed"
	TypeDMRemoved  = "dm_removed"
	TypeDMGap      = "dm_gap"
	TypeDMReadMark = "dm_read" // the event of a read mark (the frame's type too)
	TypeDMTypingEv = "dm_typing"
)

// DMOpen opens (or finds) the conversation with To; a dm_opened event
// answers.
type DMOpen struct {
	Type string `json:"type"`
	To   string `json:"to"`
	Ref  string `json:"ref,omitempty"`
}

// DMSend sends Text in the conversation with To (opening it if need be);
// a dm_sent event with Ref answers, and a dm event reaches both users.
type DMSend struct {
	Type string `json:"type"`
	To   string `json:"to"`
	Text string `json:"text"`
	Ref  string `json:"ref,omitempty"`
}

// DMTyping tells the other user of the conversation with To that the
// sender is typing.
type DMTyping struct {
	Type string `json:"type"`
	To   string `json:"to"`
	Ref  string `json:"ref,omitempty"`
}

// DMRead marks the conversation with To read up to message ID.
type DMRead struct {
	Type string `json:"type"`
	To   string `json:"to"`
	ID   string `json:"id"`
	Ref  string `json:"ref,omitempty"`
}

// DMResume replays the conversation with To after message After ("" =
// nothing: only live messages), each once, then a dm_resumed event.
type DMResume struct {
	Type  string `json:"type"`
	To    string `json:"to"`
	After string `json:"after,omitempty"`
	Ref   string `json:"ref,omitempty"`
}

func (DMOpen) FrameType() string   { return TypeDMOpen }
func (DMSend) FrameType() string   { return TypeDMSend }
func (DMTyping) FrameType() string { return TypeDMTyping }
func (DMRead) FrameType() string   { return TypeDMRead }
func (DMResume) FrameType() string { return TypeDMResume }

func (f DMOpen) withFrameType() ClientFrame   { f.Type = TypeDMOpen; return f }
func (f DMSend) withFrameType() ClientFrame   { f.Type = TypeDMSend; return f }
func (f DMTyping) withFrameType() ClientFrame { f.Type = TypeDMTyping; return f }
func (f DMRead) withFrameType() ClientFrame   { f.Type = TypeDMRead; return f }
func (f DMResume) withFrameType() ClientFrame { f.Type = TypeDMResume; return f }

func (f DMOpen) WithRef(ref string) ClientFrame   { f.Ref = ref; return f }
func (f DMSend) WithRef(ref string) ClientFrame   { f.Ref = ref; return f }
func (f DMTyping) WithRef(ref string) ClientFrame { f.Ref = ref; return f }
func (f DMRead) WithRef(ref string) ClientFrame   { f.Ref = ref; return f }
func (f DMResume) WithRef(ref string) ClientFrame { f.Ref = ref; return f }

// Conversation is a direct conversation as the dm_opened event and the
// REST API show it.
type Conversation struct {
	ID   string `json:"id"`   // "dm-" and 32 hex digits
	With string `json:"with"` // the other user
}

// DM is a direct message, on every connection of both users on every node.
type DM struct {
	Type         string `json:"type"`
	Conversation string `json:"conversation"`
	ID           string `json:"id"`
	From         string `json:"from"`
	To           string `json:"to"`
	Text         string `json:"text"`
	TS           int64  `json:"ts"`
}

// DMOpened answers a dm_open frame.
type DMOpened struct {
	Type         string       `json:"type"`
	Ref          string       `json:"ref"`
	Conversation Conversation `json:"conversation"`
}

// DMSent answers a dm_send frame: the message got ID (Repeated: a retry
// of a send already made, answered with its first id).
type DMSent struct {
	Type         string `json:"type"`
	Ref          string `json:"ref"`
	Conversation string `json:"conversation"`
	ID           string `json:"id"`
	TS           int64  `json:"ts"`
	Repeated     bool   `json:"repeated,omitempty"`
}

// DMResumed ends a dm_resume's replay: Count messages were replayed; Gap
// reports that the history no longer held what followed After.
type DMResumed struct {
	Type         string `json:"type"`
	Conversation string `json:"conversation"`
	After        string `json:"after"`
	Count        int    `json:"count"`
	Gap          bool   `json:"gap"`
	Ref          string `json:"ref"`
}

// DMRemoved: message ID of the conversation was removed by moderation.
type DMRemoved struct {
	Type         string `json:"type"`
	Conversation string `json:"conversation"`
	ID           string `json:"id"`
}

// DMGap: this node's pub/sub connection was away; live direct messages
// may have been lost: resume the conversations you follow.
type DMGap struct {
	Type string `json:"type"`
}

// DMReadEvent: User marked the conversation read up to ID (on the user's
// own connections: their unread badges follow).
type DMReadEvent struct {
	Type         string `json:"type"`
	Conversation string `json:"conversation"`
	User         string `json:"user"`
	ID           string `json:"id"`
	Unread       int64  `json:"unread"`
}

// DMTypingEvent: From is typing in the conversation.
type DMTypingEvent struct {
	Type         string `json:"type"`
	Conversation string `json:"conversation"`
	From         string `json:"from"`
	TS           int64  `json:"ts"`
}

func (DM) EventType() string            { return TypeDM }
func (DMOpened) EventType() string      { return TypeDMOpened }
func (DMSent) EventType() string        { return TypeDMSent }
func (DMResumed) EventType() string     { return TypeDMResumed }
func (DMRemoved) EventType() string     { return TypeDMRemoved }
func (DMGap) EventType() string         { return TypeDMGap }
func (DMReadEvent) EventType() string   { return TypeDMReadMark }
func (DMTypingEvent) EventType() string { return TypeDMTypingEv }

func (e DM) withEventType() ServerEvent            { e.Type = TypeDM; return e }
func (e DMOpened) withEventType() ServerEvent      { e.Type = TypeDMOpened; return e }
func (e DMSent) withEventType() ServerEvent        { e.Type = TypeDMSent; return e }
func (e DMResumed) withEventType() ServerEvent     { e.Type = TypeDMResumed; return e }
func (e DMRemoved) withEventType() ServerEvent     { e.Type = TypeDMRemoved; return e }
func (e DMGap) withEventType() ServerEvent         { e.Type = TypeDMGap; return e }
func (e DMReadEvent) withEventType() ServerEvent   { e.Type = TypeDMReadMark; return e }
func (e DMTypingEvent) withEventType() ServerEvent { e.Type = TypeDMTypingEv; return e }

// decodeDirect decodes the direct-message events (DecodeEvent), checking
// the fields each requires; ok false for another type.
func decodeDirect(typ string, line []byte) (ev ServerEvent, ok bool, err error) {
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%s event without %s", typ, what)
		}
		return nil
	}
	switch typ {
	case TypeDM:
		ev, err := decodeAs[DM](line)
		return ev, true, firstErr(err, func() error { return need(ev.Conversation != "" && ev.ID != "", "conversation and id") })
	case TypeDMOpened:
		ev, err := decodeAs[DMOpened](line)
		return ev, true, firstErr(err, func() error { return need(ev.Conversation.ID != "", "conversation.id") })
	case TypeDMSent:
		ev, err := decodeAs[DMSent](line)
		return ev, true, firstErr(err, func() error { return need(ev.ID != "", "id") })
	case TypeDMResumed:
		ev, err := decodeAs[DMResumed](line)
		return ev, true, firstErr(err, func() error { return need(ev.Conversation != "", "conversation") })
	case TypeDMRemoved:
		ev, err := decodeAs[DMRemoved](line)
		return ev, true, firstErr(err, func() error { return need(ev.Conversation != "" && ev.ID != "", "conversation and id") })
	case TypeDMGap:
		ev, err := decodeAs[DMGap](line)
		return ev, true, err
	case TypeDMReadMark:
		ev, err := decodeAs[DMReadEvent](line)
		return ev, true, firstErr(err, func() error { return need(ev.Conversation != "", "conversation") })
	case TypeDMTypingEv:
		ev, err := decodeAs[DMTypingEvent](line)
		return ev, true, firstErr(err, func() error { return need(ev.Conversation != "" && ev.From != "", "conversation and from") })
	}
	return nil, false, nil
}
