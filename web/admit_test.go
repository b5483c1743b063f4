package web

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
)

// TestCloseOfIsOneMappingForBothTransports pins the close code and reason
// a WebSocket and an event stream get alike when Chat refuses to open
// them (docs/PROTOCOL.md: 1012 reconnect elsewhere, 1013 try again later).
func TestCloseOfIsOneMappingForBothTransports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"a draining node says reconnect elsewhere", realtime.ErrDraining, realtime.CloseServiceReboot},
		{"a wrapped drain too", fmt.Errorf("connect: %w", realtime.ErrDraining), realtime.CloseServiceReboot},
		{"too many connections says try later", realtime.ErrTooManyConnections, realtime.CloseTryLater},
		{"a full node says try later", realtime.ErrNodeFull, realtime.CloseTryLater},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, reason := closeOf(tc.err)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, errcode.Message(tc.err), reason, "the client's message, as an HTTP refusal carries it")
			assert.NotEmpty(t, reason)
		})
	}
}
