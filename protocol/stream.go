package protocol

// The SSE stream (GET /api/v1/stream) carries the WebSocket's server
// events, one a record, and ends with one of these.
const (
	TypeStreamReconnect = "reconnect"
	TypeStreamClose     = "close"
)

// StreamReconnect ends a stream that should be opened again (Code 1012: the
// node drains; 1013: the reader was too slow).
type StreamReconnect struct {
	Type   string `json:"type"`
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

// StreamClose ends a stream for good, with the WebSocket close code that
// would have ended a WebSocket.
type StreamClose struct {
	Type   string `json:"type"`
	Code   int    `json:"code"`
	Reason string `json:"reason"`
}

func (StreamReconnect) EventType() string { return TypeStreamReconnect }
func (StreamClose) EventType() string     { return TypeStreamClose }

func (e StreamReconnect) withEventType() ServerEvent {
	e.Type = TypeStreamReconnect
	return e
}

func (e StreamClose) withEventType() ServerEvent {
	e.Type = TypeStreamClose
	return e
}

// StreamEvents holds a zero value of every record type only the SSE stream
// sends (the schema test walks it).
var StreamEvents = []ServerEvent{StreamReconnect{}, StreamClose{}}

// AppendRecord appends one SSE record: an "event:" line when event is not
// empty (the stream's own records), an "id:" line when id is not empty
// (the stream position after a message), and data, one JSON object (no
// newline inside), as its "data:" line.
func AppendRecord(b []byte, event, id string, data []byte) []byte {
	if event != "" {
		b = append(b, "event: "...)
		b = append(b, event...)
		b = append(b, '\n')
	}
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}
