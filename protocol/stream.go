package protocol

import (
	"bufio"
	"bytes"
	"io"
	"strings"
)

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

// Record is one SSE record as read.
type Record struct {
	// ID is the record's "id:" (the stream position), "" when it has none.
	ID    string
	HasID bool
	// Event is the record's "event:" ("reconnect", "close"), "" for a
	// server event.
	Event string
	// Data is the record's data lines joined by '\n': one JSON object.
	Data []byte
}

// RecordReader reads the records of an event stream as EventSource does
// (the WHATWG event stream format): "field: value" lines, a blank line
// ending a record, ":" lines comments, a block without data no record.
type RecordReader struct {
	br *bufio.Reader
	// OnComment, when set, gets each comment line (": ping").
	OnComment func(line string)
}

// NewRecordReader reads records from r.
func NewRecordReader(r io.Reader) *RecordReader {
	return &RecordReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next record; the reader's error (io.EOF at the end)
// once the stream ends.
func (rr *RecordReader) Next() (Record, error) {
	var rec Record
	var data [][]byte
	for {
		line, err := rr.br.ReadString('\n')
		if err != nil {
			return Record{}, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if len(data) == 0 {
				rec = Record{}
				continue
			}
			rec.Data = bytes.Join(data, []byte("\n"))
			return rec, nil
		}
		if strings.HasPrefix(line, ":") {
			if rr.OnComment != nil {
				rr.OnComment(line)
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			rec.ID, rec.HasID = value, true
		case "event":
			rec.Event = value
		case "data":
			data = append(data, []byte(value))
		}
	}
}
