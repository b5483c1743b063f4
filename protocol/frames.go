package protocol

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/chatd/chatd/errcode"
)

// Limits of a client frame.
const (
	// MaxFrame is the largest frame the server takes; a larger one closes
	// the connection with 1009.
	MaxFrame = 64 << 10
	// MaxRef is the longest "ref" a frame may carry.
	MaxRef = 64
)

// The client frame types.
const (
	TypeJoin    = "join"
	TypeSay     = "say"
	TypeLeave   = "leave"
	TypeResume  = "resume"
	TypeTyping  = "typing"
	TypeRead    = "read"
	TypePing    = "ping"
	TypeQueue   = "queue"
	TypeDequeue = "dequeue"
	TypeInvite  = "invite"
	TypeAccept  = "accept"
	TypeDecline = "decline"
)

// ClientFrame is a client → server frame: one of the frame types of this
// file, by value. EncodeFrame sets its Type.
type ClientFrame interface {
	FrameType() string
	// WithRef returns the frame with its ref set to ref (every frame has
	// one: the server names it in its answer).
	WithRef(ref string) ClientFrame
	withFrameType() ClientFrame
}

// Join asks for a seat in a room of Lobby (the server picks the room).
type Join struct {
	Type  string `json:"type"`
	Lobby string `json:"lobby"`
	Ref   string `json:"ref,omitempty"`
}

// Say sends Text to Room; an ack (or an error) with Ref answers it.
type Say struct {
	Type string `json:"type"`
	Room string `json:"room"`
	Text string `json:"text"`
	Ref  string `json:"ref,omitempty"`
}

// Leave gives up the seat in Room.
type Leave struct {
	Type string `json:"type"`
	Room string `json:"room"`
	Ref  string `json:"ref,omitempty"`
}

// Resume takes the seat in Room again and replays the messages after
// After ("" = the latest).
type Resume struct {
	Type  string `json:"type"`
	Room  string `json:"room"`
	After string `json:"after,omitempty"`
	Ref   string `json:"ref,omitempty"`
}

// Typing tells Room's other members the user is typing.
type Typing struct {
	Type string `json:"type"`
	Room string `json:"room"`
	Ref  string `json:"ref,omitempty"`
}

// Read marks Room read up to message ID.
type Read struct {
	Type string `json:"type"`
	Room string `json:"room"`
	ID   string `json:"id"`
	Ref  string `json:"ref,omitempty"`
}

// Ping asks for a pong.
type Ping struct {
	Type string `json:"type"`
	Ref  string `json:"ref,omitempty"`
}

// Queue submits a matchmaking ticket to Queue; a queued event answers.
type Queue struct {
	Type       string            `json:"type"`
	Queue      string            `json:"queue"`
	Skill      *float64          `json:"skill"`
	Party      []string          `json:"party,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Ref        string            `json:"ref,omitempty"`
}

// Dequeue cancels Ticket of Queue; a dequeued event answers.
type Dequeue struct {
	Type   string `json:"type"`
	Queue  string `json:"queue"`
	Ticket string `json:"ticket"`
	Ref    string `json:"ref,omitempty"`
}

// Invite forms a party in Queue: the sender leads, each user of Party is
// invited and must accept; a party event answers with the pending ticket.
type Invite struct {
	Type       string            `json:"type"`
	Queue      string            `json:"queue"`
	Skill      *float64          `json:"skill"`
	Party      []string          `json:"party"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Ref        string            `json:"ref,omitempty"`
}

// Accept accepts the invitation to the pending party Ticket of Queue; a
// party event answers.
type Accept struct {
	Type   string `json:"type"`
	Queue  string `json:"queue"`
	Ticket string `json:"ticket"`
	Ref    string `json:"ref,omitempty"`
}

// Decline declines the invitation to the pending party Ticket of Queue,
// which dissolves it; a party event answers.
type Decline struct {
	Type   string `json:"type"`
	Queue  string `json:"queue"`
	Ticket string `json:"ticket"`
	Ref    string `json:"ref,omitempty"`
}

func (Join) FrameType() string    { return TypeJoin }
func (Say) FrameType() string     { return TypeSay }
func (Leave) FrameType() string   { return TypeLeave }
func (Resume) FrameType() string  { return TypeResume }
func (Typing) FrameType() string  { return TypeTyping }
func (Read) FrameType() string    { return TypeRead }
func (Ping) FrameType() string    { return TypePing }
func (Queue) FrameType() string   { return TypeQueue }
func (Dequeue) FrameType() string { return TypeDequeue }
func (Invite) FrameType() string  { return TypeInvite }
func (Accept) FrameType() string  { return TypeAccept }
func (Decline) FrameType() string { return TypeDecline }

func (f Join) withFrameType() ClientFrame    { f.Type = TypeJoin; return f }
func (f Say) withFrameType() ClientFrame     { f.Type = TypeSay; return f }
func (f Leave) withFrameType() ClientFrame   { f.Type = TypeLeave; return f }
func (f Resume) withFrameType() ClientFrame  { f.Type = TypeResume; return f }
func (f Typing) withFrameType() ClientFrame  { f.Type = TypeTyping; return f }
func (f Read) withFrameType() ClientFrame    { f.Type = TypeRead; return f }
func (f Ping) withFrameType() ClientFrame    { f.Type = TypePing; return f }
func (f Queue) withFrameType() ClientFrame   { f.Type = TypeQueue; return f }
func (f Dequeue) withFrameType() ClientFrame { f.Type = TypeDequeue; return f }
func (f Invite) withFrameType() ClientFrame  { f.Type = TypeInvite; return f }
func (f Accept) withFrameType() ClientFrame  { f.Type = TypeAccept; return f }
func (f Decline) withFrameType() ClientFrame { f.Type = TypeDecline; return f }

func (f Join) WithRef(ref string) ClientFrame    { f.Ref = ref; return f }
func (f Say) WithRef(ref string) ClientFrame     { f.Ref = ref; return f }
func (f Leave) WithRef(ref string) ClientFrame   { f.Ref = ref; return f }
func (f Resume) WithRef(ref string) ClientFrame  { f.Ref = ref; return f }
func (f Typing) WithRef(ref string) ClientFrame  { f.Ref = ref; return f }
func (f Read) WithRef(ref string) ClientFrame    { f.Ref = ref; return f }
func (f Ping) WithRef(ref string) ClientFrame    { f.Ref = ref; return f }
func (f Queue) WithRef(ref string) ClientFrame   { f.Ref = ref; return f }
func (f Dequeue) WithRef(ref string) ClientFrame { f.Ref = ref; return f }
func (f Invite) WithRef(ref string) ClientFrame  { f.Ref = ref; return f }
func (f Accept) WithRef(ref string) ClientFrame  { f.Ref = ref; return f }
func (f Decline) WithRef(ref string) ClientFrame { f.Ref = ref; return f }

// ClientFrames holds a zero value of every client frame type (the schema
// test walks it).
var ClientFrames = []ClientFrame{Join{}, Say{}, Leave{}, Resume{}, Typing{}, Read{}, Ping{}, Queue{}, Dequeue{},
	Invite{}, Accept{}, Decline{}, RPC{}, DMOpen{}, DMSend{}, DMTyping{}, DMRead{}, DMResume{}}

// EncodeFrame encodes f with its type set. A frame over MaxFrame is an
// error with errcode.TooLarge (the server would close the connection).
func EncodeFrame(f ClientFrame) ([]byte, error) {
	p, err := json.Marshal(f.withFrameType())
	if err != nil {
		return nil, err
	}
	if len(p) > MaxFrame {
		return nil, errcode.Errorf(errcode.TooLarge, "the frame would be %d bytes; the server takes at most %d", len(p), MaxFrame)
	}
	return p, nil
}

// Frame is any client frame as the server decodes it: the union of the
// fields of every frame type, read by Type.
type Frame struct {
	Type  string `json:"type"`
	Lobby string `json:"lobby"`
	Room  string `json:"room"`
	Text  string `json:"text"`
	Ref   string `json:"ref"`
	After string `json:"after"`
	ID    string `json:"id"`
	// queue, dequeue, invite, accept and decline
	Queue      string            `json:"queue"`
	Ticket     string            `json:"ticket"`
	Skill      *float64          `json:"skill"`
	Party      []string          `json:"party"`
	Attributes map[string]string `json:"attributes"`
	// rpc
	Method string          `json:"method"`
	Data   json.RawMessage `json:"data"`
	// dm_open, dm_send, dm_typing, dm_read, dm_resume
	To string `json:"to"`
}

// decodeFrame is DecodeJSON(p, f), without its json.Decoder for a frame
// that is good JSON: json.Unmarshal reads p where it is and refuses
// anything after the one value, where a Decoder copies p into a buffer of
// its own (a frame's largest allocation, for every frame a node reads).
// A Frame holds no interface value, so DecodeJSON's UseNumber changes
// nothing. A frame Unmarshal refuses is decoded again by DecodeJSON, for
// its error and for what it could read (FuzzDecode holds the two to the
// same answers).
func decodeFrame(p []byte, f *Frame) error {
	if err := CheckDepth(p); err != nil {
		return err
	}
	if json.Unmarshal(p, f) == nil {
		return nil
	}
	*f = Frame{}
	return DecodeJSON(p, f)
}

// Decode decodes a client frame strictly: one JSON object (DecodeJSON)
// of UTF-8 text with a string "type" and a "ref" of at most MaxRef
// bytes. Its errors carry errcode.BadJSON or errcode.BadRequest and a
// sentence for the client; the frame returned with an error holds what
// could be read (its Room and Ref address the error event), except that
// an over-long ref is dropped.
func Decode(p []byte) (Frame, error) {
	var f Frame
	if !utf8.Valid(p) {
		return f, errcode.Errorf(errcode.BadJSON, "frames must be UTF-8 text")
	}
	if err := decodeFrame(p, &f); err != nil {
		return f, err
	}
	if f.Type == "" {
		return f, errcode.Errorf(errcode.BadRequest, `every frame needs a "type"`)
	}
	if len(f.Ref) > MaxRef {
		return Frame{Type: f.Type}, errcode.Errorf(errcode.BadRequest, "%s", fmt.Sprintf(`"ref" is longer than %d characters`, MaxRef))
	}
	return f, nil
}
