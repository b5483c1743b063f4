package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/chatd/chatd/protocol"
)

// errRPCLost fails a WebSocket call whose connection dropped before its
// answer: it may or may not have reached the backend, and the Conn never
// sends a call twice.
var errRPCLost = errors.New("client: rpc: the connection dropped before the answer; the call may or may not have run")

// MatchedEvent: a ticket of the user was matched (the WebSocket's matched
// event): join Room (JoinRoom, or Resume on a Conn) within ReserveSeconds.
// Data is what the application's match hook attached (a game server's
// address, say), the same for every player; nil = none.
type MatchedEvent struct {
	Queue, Ticket, Match, Room string
	Players                    []string
	ReserveSeconds             int
	TS                         int64 // unix ms
	Data                       json.RawMessage
}

func (MatchedEvent) isEvent() {}

// RPC calls method of the application's backend (the server's rpc hook,
// docs/PROTOCOL.md "Hooks") with data (any value JSON encodes; nil = none)
// over the WebSocket and returns the backend's answer. The server's
// refusals are *Error values: hook_denied (the backend refused; its reason
// in Message), hook_unavailable, not_found (no rpc hook), rate_limited,
// bad_name (the method), too_large. A call is never sent twice: when the
// connection drops before the answer it fails, and the backend may have
// run it.
func (cn *Conn) RPC(ctx context.Context, method string, data any) (json.RawMessage, error) {
	raw, err := rpcData(data)
	if err != nil {
		return nil, err
	}
	r, err := cn.call(ctx, &op{kind: opRPC}, protocol.RPC{Method: method, Data: raw})
	return r.data, err
}

// RPC is Conn.RPC over REST (POST /api/v1/rpc/{method}); it is not
// retried after an unknown outcome.
func (c *Client) RPC(ctx context.Context, method string, data any) (json.RawMessage, error) {
	var out struct {
		Data json.RawMessage `json:"data"`
	}
	var body any
	if data != nil {
		body = data
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("rpc", method), body: body, out: &out})
	if string(out.Data) == "null" {
		out.Data = nil
	}
	return out.Data, err
}

func rpcData(data any) (json.RawMessage, error) {
	if data == nil {
		return nil, nil
	}
	if raw, ok := data.(json.RawMessage); ok {
		return raw, nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("client: rpc: encode data: %w", err)
	}
	return raw, nil
}
