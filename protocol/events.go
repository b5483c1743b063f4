package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/errcode"
)

// The server event types.
const (
	TypeHello          = "hello"
	TypeJoined         = "joined"
	TypeMessage        = "message"
	TypeAck            = "ack"
	TypePresence       = "presence"
	TypeSettings       = "settings"
	TypeNotice         = "notice"
	TypeError          = "error"
	TypeLeft           = "left"
	TypePong           = "pong"
	TypeMessageRemoved = "message_removed"
	TypeQueued         = "queued"
	TypeDequeued       = "dequeued"
	TypeMatched        = "matched"
	TypeTicketExpired  = "ticket_expired"
	TypeParty          = "party"
	TypePartyInvite    = "party_invite"
	TypePartyUpdate    = "party_update"
	// TypeTyping ("typing") is both a client frame and a server event.
)

// Presence states.
const (
	StateJoined = "joined"
	StateLeft   = "left"
)

// ServerEvent is a server → client event: one of the event types of this
// package, by value. Encode sets its Type.
type ServerEvent interface {
	EventType() string
	withEventType() ServerEvent
}

// Room is a room as the joined event (and the REST API) shows it.
type Room struct {
	ID       string   `json:"id"`       // "{lobby}-{seq}", e.g. "general-3"
	Lobby    string   `json:"lobby"`    // the lobby's name
	Seq      int      `json:"seq"`      // the room's number in its lobby, from 1
	Capacity int      `json:"capacity"` // the current room.capacity
	Members  []string `json:"members"`  // users holding a live seat, sorted
}

// Message is a chat message. Its ts is RFC 3339 in UTC with exactly three
// fraction digits.
type Message struct {
	ID   string    `json:"id"`
	Room string    `json:"room"`
	From string    `json:"from"`
	Text string    `json:"text"`
	TS   time.Time `json:"ts"`
}

// TSLayout is the layout of a message's ts.
const TSLayout = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON encodes m with its ts in TSLayout, UTC.
func (m Message) MarshalJSON() ([]byte, error) {
	type wire struct {
		ID   string `json:"id"`
		Room string `json:"room"`
		From string `json:"from"`
		Text string `json:"text"`
		TS   string `json:"ts"`
	}
	return json.Marshal(wire{ID: m.ID, Room: m.Room, From: m.From, Text: m.Text, TS: m.TS.UTC().Format(TSLayout)})
}

// Ticket is a matchmaking ticket's status (the queued and dequeued events,
// and the REST API). Times are unix milliseconds.
type Ticket struct {
	ID         string            `json:"id"`
	Queue      string            `json:"queue"`
	User       string            `json:"user"`
	Party      []string          `json:"party,omitempty"`
	Skill      float64           `json:"skill"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Created    int64             `json:"created"`
	State      string            `json:"state"` // pending, waiting, matched, cancelled, expired
	Ended      int64             `json:"ended,omitempty"`
	// TroubleSince: the queue's matcher has failed since then (waiting
	// tickets only).
	TroubleSince int64    `json:"trouble_since,omitempty"`
	Match        string   `json:"match,omitempty"`
	Room         string   `json:"room,omitempty"`
	Players      []string `json:"players,omitempty"`
	// Accepted: a party's invitees who accepted (canonical names);
	// Expires, on a pending party only: when its invitations lapse.
	Accepted []string `json:"accepted,omitempty"`
	Expires  int64    `json:"expires,omitempty"`
}

// Hello is the first event of a connection.
type Hello struct {
	Type string `json:"type"`
	User string `json:"user"`
	Node string `json:"node"`
	Motd string `json:"motd"`
	// Data is what the application's connect hook attached to this
	// connection; absent when none.
	Data json.RawMessage `json:"data,omitempty"`
}

// Joined: the connection is in Room (after a join or a resume).
type Joined struct {
	Type string `json:"type"`
	Room Room   `json:"room"`
}

// MessageEvent carries a message of a room the connection is in.
type MessageEvent struct {
	Type    string  `json:"type"`
	Message Message `json:"message"`
}

// Ack answers a say: the message got ID.
type Ack struct {
	Type string `json:"type"`
	Ref  string `json:"ref"`
	ID   string `json:"id"`
	Room string `json:"room"`
}

// Presence: User took a seat in (StateJoined) or left (StateLeft) Room.
type Presence struct {
	Type  string `json:"type"`
	Room  string `json:"room"`
	User  string `json:"user"`
	State string `json:"state"`
}

// Settings: a live setting changed. Value is a number or a string.
type Settings struct {
	Type    string `json:"type"`
	Key     string `json:"key"`
	Value   any    `json:"value"`
	Version int64  `json:"version"`
}

// Notice is an admin notice.
type Notice struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Text string `json:"text"`
}

// ErrorEvent refuses a frame (Ref and Room are those of the frame).
type ErrorEvent struct {
	Type    string       `json:"type"`
	Code    errcode.Code `json:"code"`
	Message string       `json:"message"`
	Ref     string       `json:"ref,omitempty"`
	Room    string       `json:"room,omitempty"`
}

// Left: the user left Room from another connection or over REST.
type Left struct {
	Type string `json:"type"`
	Room string `json:"room"`
}

// Pong answers a ping.
type Pong struct {
	Type string `json:"type"`
}

// TypingEvent: User, another member of Room, is typing.
type TypingEvent struct {
	Type string `json:"type"`
	Room string `json:"room"`
	User string `json:"user"`
}

// MessageRemoved: an admin removed message ID of Room.
type MessageRemoved struct {
	Type string `json:"type"`
	Room string `json:"room"`
	ID   string `json:"id"`
}

// Queued answers a queue frame with the ticket's status.
type Queued struct {
	Type   string `json:"type"`
	Ref    string `json:"ref,omitempty"`
	Ticket Ticket `json:"ticket"`
}

// Dequeued answers a dequeue frame with the ticket's status after.
type Dequeued struct {
	Type   string `json:"type"`
	Ref    string `json:"ref,omitempty"`
	Ticket Ticket `json:"ticket"`
}

// Matched: Ticket of Queue is in Match; the players meet in Room, which
// holds their seats ReserveSeconds. TS is unix milliseconds.
type Matched struct {
	Type           string   `json:"type"`
	Queue          string   `json:"queue"`
	Ticket         string   `json:"ticket"`
	Match          string   `json:"match"`
	Room           string   `json:"room"`
	Players        []string `json:"players"`
	ReserveSeconds int      `json:"reserve_seconds"`
	TS             int64    `json:"ts"`
	// Data is what the application's match hook attached to the match (a
	// game server's address, say); absent when none.
	Data json.RawMessage `json:"data,omitempty"`
}

// TicketExpired: Ticket of Queue waited too long. TS is unix milliseconds.
type TicketExpired struct {
	Type   string `json:"type"`
	Queue  string `json:"queue"`
	Ticket string `json:"ticket"`
	TS     int64  `json:"ts"`
}

// Party answers an invite, accept or decline frame with the party's
// ticket after.
type Party struct {
	Type   string `json:"type"`
	Ref    string `json:"ref,omitempty"`
	Ticket Ticket `json:"ticket"`
}

// PartyInvite: Leader invited the user to the pending party Ticket of
// Queue with Players; accept or decline it before Expires (unix ms). TS
// is unix milliseconds.
type PartyInvite struct {
	Type     string   `json:"type"`
	Queue    string   `json:"queue"`
	Ticket   string   `json:"ticket"`
	Leader   string   `json:"leader"`
	Players  []string `json:"players"`
	State    string   `json:"state,omitempty"` // pending
	Accepted []string `json:"accepted,omitempty"`
	Expires  int64    `json:"expires"`
	TS       int64    `json:"ts"`
}

// PartyUpdate: the party Ticket of Queue changed: User accepted (State
// pending, or waiting once every invitee did) or it was dissolved (State
// cancelled; Reason declined, cancelled or offline). TS is unix
// milliseconds.
type PartyUpdate struct {
	Type     string   `json:"type"`
	Queue    string   `json:"queue"`
	Ticket   string   `json:"ticket"`
	Leader   string   `json:"leader"`
	Players  []string `json:"players"`
	State    string   `json:"state"`
	User     string   `json:"user"`
	Reason   string   `json:"reason"`
	Accepted []string `json:"accepted,omitempty"`
	TS       int64    `json:"ts"`
}

// Unknown is an event of a type this package does not know (a newer
// server): DecodeEvent passes it through unchecked.
type Unknown struct {
	Type string `json:"type"`
}

func (Hello) EventType() string          { return TypeHello }
func (Joined) EventType() string         { return TypeJoined }
func (MessageEvent) EventType() string   { return TypeMessage }
func (Ack) EventType() string            { return TypeAck }
func (Presence) EventType() string       { return TypePresence }
func (Settings) EventType() string       { return TypeSettings }
func (Notice) EventType() string         { return TypeNotice }
func (ErrorEvent) EventType() string     { return TypeError }
func (Left) EventType() string           { return TypeLeft }
func (Pong) EventType() string           { return TypePong }
func (TypingEvent) EventType() string    { return TypeTyping }
func (MessageRemoved) EventType() string { return TypeMessageRemoved }
func (Queued) EventType() string         { return TypeQueued }
func (Dequeued) EventType() string       { return TypeDequeued }
func (Matched) EventType() string        { return TypeMatched }
func (TicketExpired) EventType() string  { return TypeTicketExpired }
func (Party) EventType() string          { return TypeParty }
func (PartyInvite) EventType() string    { return TypePartyInvite }
func (PartyUpdate) EventType() string    { return TypePartyUpdate }
func (e Unknown) EventType() string      { return e.Type }

func (e Hello) withEventType() ServerEvent          { e.Type = TypeHello; return e }
func (e Joined) withEventType() ServerEvent         { e.Type = TypeJoined; return e }
func (e MessageEvent) withEventType() ServerEvent   { e.Type = TypeMessage; return e }
func (e Ack) withEventType() ServerEvent            { e.Type = TypeAck; return e }
func (e Presence) withEventType() ServerEvent       { e.Type = TypePresence; return e }
func (e Settings) withEventType() ServerEvent       { e.Type = TypeSettings; return e }
func (e Notice) withEventType() ServerEvent         { e.Type = TypeNotice; return e }
func (e ErrorEvent) withEventType() ServerEvent     { e.Type = TypeError; return e }
func (e Left) withEventType() ServerEvent           { e.Type = TypeLeft; return e }
func (e Pong) withEventType() ServerEvent           { e.Type = TypePong; return e }
func (e TypingEvent) withEventType() ServerEvent    { e.Type = TypeTyping; return e }
func (e MessageRemoved) withEventType() ServerEvent { e.Type = TypeMessageRemoved; return e }
func (e Queued) withEventType() ServerEvent         { e.Type = TypeQueued; return e }
func (e Dequeued) withEventType() ServerEvent       { e.Type = TypeDequeued; return e }
func (e Matched) withEventType() ServerEvent        { e.Type = TypeMatched; return e }
func (e TicketExpired) withEventType() ServerEvent  { e.Type = TypeTicketExpired; return e }
func (e Party) withEventType() ServerEvent          { e.Type = TypeParty; return e }
func (e PartyInvite) withEventType() ServerEvent    { e.Type = TypePartyInvite; return e }
func (e PartyUpdate) withEventType() ServerEvent    { e.Type = TypePartyUpdate; return e }
func (e Unknown) withEventType() ServerEvent        { return e }

// ServerEvents holds a zero value of every WebSocket server event type
// (the schema test walks it).
var ServerEvents = []ServerEvent{Hello{}, Joined{}, MessageEvent{}, Ack{}, Presence{}, Settings{}, Notice{},
	ErrorEvent{}, Left{}, Pong{}, TypingEvent{}, MessageRemoved{}, Queued{}, Dequeued{}, Matched{}, TicketExpired{},
	Party{}, PartyInvite{}, PartyUpdate{}, RPCResult{}, DM{}, DMOpened{}, DMSent{}, DMResumed{}, DMRemoved{}, DMGap{}, DMReadEvent{},
	DMTypingEvent{}}

// Encode encodes ev with its type set: the one way the server turns an
// event into bytes. It fails only for a Settings value JSON cannot hold.
func Encode(ev ServerEvent) ([]byte, error) {
	return json.Marshal(ev.withEventType())
}

// DecodeEvent decodes one server event and checks the fields its type
// requires, so that a client never acts on a half-formed event. An event
// of a type this package does not know comes back as Unknown, unchecked.
func DecodeEvent(line []byte) (ServerEvent, error) {
	if !utf8.Valid(line) {
		return nil, errors.New("not UTF-8")
	}
	var head struct {
		Type string `json:"type"`
	}
	if t, ok := peekType(line); ok {
		head.Type = t
	} else if err := json.Unmarshal(line, &head); err != nil {
		return nil, err
	}
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%s event without %s", head.Type, what)
		}
		return nil
	}
	switch head.Type {
	case "":
		return nil, errors.New(`event without "type"`)
	case TypeHello:
		ev, err := decodeAs[Hello](line)
		return ev, firstErr(err, func() error { return need(ev.User != "", "user") })
	case TypeJoined:
		ev, err := decodeAs[Joined](line)
		return ev, firstErr(err, func() error { return need(ev.Room.ID != "", "room.id") })
	case TypeMessage:
		ev, err := decodeAs[MessageEvent](line)
		return ev, firstErr(err, func() error {
			return need(ev.Message.ID != "" && ev.Message.Room != "", "message.id and message.room")
		})
	case TypeAck:
		ev, err := decodeAs[Ack](line)
		// the ref is the say's, "" when the say had none
		return ev, firstErr(err, func() error { return need(ev.ID != "", "id") })
	case TypePresence:
		ev, err := decodeAs[Presence](line)
		return ev, firstErr(err, func() error { return need(ev.Room != "" && ev.User != "", "room and user") })
	case TypeTyping:
		ev, err := decodeAs[TypingEvent](line)
		return ev, firstErr(err, func() error { return need(ev.Room != "" && ev.User != "", "room and user") })
	case TypeMessageRemoved:
		ev, err := decodeAs[MessageRemoved](line)
		return ev, firstErr(err, func() error { return need(ev.Room != "" && ev.ID != "", "room and id") })
	case TypeLeft:
		ev, err := decodeAs[Left](line)
		return ev, firstErr(err, func() error { return need(ev.Room != "", "room") })
	case TypeSettings:
		ev, err := decodeAs[Settings](line)
		return ev, firstErr(err, func() error { return need(ev.Key != "", "key") })
	case TypeNotice:
		ev, err := decodeAs[Notice](line)
		return ev, firstErr(err, func() error { return need(ev.ID != "", "id") })
	case TypeError:
		ev, err := decodeAs[ErrorEvent](line)
		return ev, firstErr(err, func() error { return need(ev.Code != "", "code") })
	case TypePong:
		return decodeAs[Pong](line)
	case TypeQueued:
		ev, err := decodeAs[Queued](line)
		return ev, firstErr(err, func() error { return need(ev.Ticket.ID != "", "ticket.id") })
	case TypeDequeued:
		ev, err := decodeAs[Dequeued](line)
		return ev, firstErr(err, func() error { return need(ev.Ticket.ID != "", "ticket.id") })
	case TypeMatched:
		ev, err := decodeAs[Matched](line)
		return ev, firstErr(err, func() error { return need(ev.Ticket != "" && ev.Room != "", "ticket and room") })
	case TypeTicketExpired:
		ev, err := decodeAs[TicketExpired](line)
		return ev, firstErr(err, func() error { return need(ev.Ticket != "", "ticket") })
	case TypeParty:
		ev, err := decodeAs[Party](line)
		return ev, firstErr(err, func() error { return need(ev.Ticket.ID != "", "ticket.id") })
	case TypePartyInvite:
		ev, err := decodeAs[PartyInvite](line)
		return ev, firstErr(err, func() error { return need(ev.Ticket != "" && ev.Leader != "", "ticket and leader") })
	case TypePartyUpdate:
		ev, err := decodeAs[PartyUpdate](line)
		return ev, firstErr(err, func() error { return need(ev.Ticket != "" && ev.State != "", "ticket and state") })
	case TypeRPCResult:
		return decodeAs[RPCResult](line)
	}
	if ev, ok, err := decodeDirect(head.Type, line); ok {
		return ev, err
	}
	return Unknown{Type: head.Type}, nil
}

// typePrefix starts every event the server encodes: Encode writes the
// type first.
var typePrefix = []byte(`{"type":"`)

// peekType reads the type of an event that starts with typePrefix and
// whose type has no escape, without decoding the event twice; anything
// else is left to the decoder. The decode that follows checks the rest
// of the line and its type again.
func peekType(line []byte) (string, bool) {
	if !bytes.HasPrefix(line, typePrefix) {
		return "", false
	}
	rest := line[len(typePrefix):]
	i := bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return "", false
	}
	return string(rest[:i]), true
}

func decodeAs[E ServerEvent](line []byte) (E, error) {
	var ev E
	if err := json.Unmarshal(line, &ev); err != nil {
		return ev, err
	}
	if t := ev.EventType(); t != "" {
		// a repeated "type" key: the decoder kept the last one
		if got := typeField(ev); got != t {
			return ev, fmt.Errorf("an event with two types (%q and %q)", t, got)
		}
	}
	return ev, nil
}

func firstErr(err error, check func() error) error {
	if err != nil {
		return err
	}
	return check()
}

// typeField is the Type field of a decoded event: the first field of
// every event type.
func typeField(ev ServerEvent) string {
	return reflect.ValueOf(ev).Field(0).String()
}
