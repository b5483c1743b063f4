package protocol_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
)

func TestEncodeSetsTheType(t *testing.T) {
	for _, ev := range append(append([]protocol.ServerEvent{}, protocol.ServerEvents...), protocol.StreamEvents...) {
		b, err := protocol.Encode(ev)
		require.NoError(t, err)
		assert.Contains(t, string(b), `{"type":"`+ev.EventType()+`"`, "Encode writes the type first")
	}
	for _, f := range protocol.ClientFrames {
		b, err := protocol.EncodeFrame(f)
		require.NoError(t, err)
		assert.Contains(t, string(b), `{"type":"`+f.FrameType()+`"`)
	}
}

func TestDecodeEvent(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       protocol.ServerEvent
		err        string
	}{
		{"an ack", `{"type":"ack","ref":"r1","id":"1-0","room":"g-1"}`, protocol.Ack{Type: "ack", Ref: "r1", ID: "1-0", Room: "g-1"}, ""},
		{"an error without ref", `{"type":"error","code":"not_seated","message":"no"}`,
			protocol.ErrorEvent{Type: "error", Code: errcode.NotSeated, Message: "no"}, ""},
		{"type not first", `{"room":"g-1","type":"left"}`, protocol.Left{Type: "left", Room: "g-1"}, ""},
		{"a newer type passes", `{"type":"sticker","from":"bob"}`, protocol.Unknown{Type: "sticker"}, ""},
		{"a joined without a room", `{"type":"joined","room":null}`, nil, "joined event without room.id"},
		{"a room that is not a string", `{"type":"left","room":5}`, nil, "cannot unmarshal"},
		{"two types", `{"type":"pong","type":"ack","ref":"r","id":"1-0","room":"g"}`, nil, "two types"},
		{"no type", `{"room":"g-1"}`, nil, `event without "type"`},
		{"not UTF-8", "{\"type\":\"pong\xff\"}", nil, "not UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, err := protocol.DecodeEvent([]byte(tc.line))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, ev)
		})
	}
}

func TestDecodeFrame(t *testing.T) {
	f, err := protocol.Decode([]byte(`{"type":"queue","queue":"quick","skill":1500,"party":["bob"],"ref":"q1"}`))
	require.NoError(t, err)
	require.NotNil(t, f.Skill)
	assert.Equal(t, 1500.0, *f.Skill)
	assert.Equal(t, []string{"bob"}, f.Party)
	_, err = protocol.Decode([]byte(`{"type":"say","text":5}`))
	assert.Equal(t, errcode.BadRequest, errcode.Of(err))
	assert.Equal(t, `field "text" must be a string, not number`, errcode.Message(err))
	f, err = protocol.Decode([]byte(`{"type":"ping","room":"g-1","ref":"` + strings.Repeat("r", 65) + `"}`))
	assert.Equal(t, errcode.BadRequest, errcode.Of(err))
	assert.Equal(t, protocol.Frame{Type: "ping"}, f, "an over-long ref is not echoed")
}
