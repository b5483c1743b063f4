package protocol

import "encoding/json"

// The rpc frame and its answer: a call the server forwards to the
// application's backend (the rpc hook, docs/PROTOCOL.md "Hooks").
const (
	TypeRPC       = "rpc"
	TypeRPCResult = "rpc_result"
)

// RPC calls Method of the application's backend with Data (any JSON); an
// rpc_result with Ref answers it, or an error event with Ref (hook_denied,
// hook_unavailable, not_found when the server has no rpc hook).
type RPC struct {
	Type   string          `json:"type"`
	Method string          `json:"method"`
	Data   json.RawMessage `json:"data,omitempty"`
	Ref    string          `json:"ref,omitempty"`
}

func (RPC) FrameType() string                  { return TypeRPC }
func (f RPC) withFrameType() ClientFrame       { f.Type = TypeRPC; return f }
func (f RPC) WithRef(ref string) ClientFrame   { f.Ref = ref; return f }
func (RPCResult) EventType() string            { return TypeRPCResult }
func (e RPCResult) withEventType() ServerEvent { e.Type = TypeRPCResult; return e }

// RPCResult is the backend's answer to the rpc frame Ref: Data is its
// data (absent when it gave none).
type RPCResult struct {
	Type   string          `json:"type"`
	Ref    string          `json:"ref"`
	Method string          `json:"method"`
	Data   json.RawMessage `json:"data,omitempty"`
}
