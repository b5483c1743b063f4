package protocol_test

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/protocol"
)

// TestRecordsRoundTrip: what AppendRecord writes, RecordReader reads back,
// comments and blocks without data aside.
func TestRecordsRoundTrip(t *testing.T) {
	var b []byte
	b = protocol.AppendRecord(b, "", "", []byte(`{"type":"hello","user":"a","node":"n","motd":""}`))
	b = append(b, ": ping\n\n"...)
	b = protocol.AppendRecord(b, "", "g-1@1-0", []byte(`{"type":"message"}`))
	b = append(b, "id: lonely\n\n"...)
	b = protocol.AppendRecord(b, protocol.TypeStreamClose, "", []byte(`{"type":"close","code":4000,"reason":"bye"}`))
	var comments []string
	rr := protocol.NewRecordReader(strings.NewReader(string(b)))
	rr.OnComment = func(l string) { comments = append(comments, l) }
	var got []protocol.Record
	for {
		rec, err := rr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, rec)
	}
	require.Len(t, got, 3)
	assert.Equal(t, protocol.Record{Data: []byte(`{"type":"hello","user":"a","node":"n","motd":""}`)}, got[0])
	assert.Equal(t, protocol.Record{ID: "g-1@1-0", HasID: true, Data: []byte(`{"type":"message"}`)}, got[1])
	assert.Equal(t, "close", got[2].Event)
	assert.Equal(t, []string{": ping"}, comments)
}
