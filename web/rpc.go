package web

import (
	"context"
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
)

// rpcCaller forwards a client's call to the application's backend
// (realtime/rpc).
type rpcCaller interface {
	Call(ctx context.Context, p realtime.Principal, method string, data json.RawMessage) (json.RawMessage, error)
}

// rpcAPI serves the rpc hook's calls: POST /api/v1/rpc/{method} and the
// WebSocket rpc frame.
type rpcAPI struct {
	rpc rpcCaller
}

func (h *rpcAPI) routes(api fiber.Router, a *authAPI) {
	api.Post("/rpc/:method", a.requireUser, h.call)
}

// call is POST /api/v1/rpc/{method}: the body (any JSON, or none) is the
// call's data; the answer is {"method", "data"}.
func (h *rpcAPI) call(c *fiber.Ctx) error {
	method := c.Params("method")
	data, err := h.rpc.Call(c.UserContext(), principal(c), method, json.RawMessage(c.Body()))
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"method": method, "data": data})
}

// frame is the WebSocket rpc frame: answered by rpc_result with its ref.
func (h *rpcAPI) frame(ctx context.Context, c *realtime.Client, f protocol.Frame) error {
	data, err := h.rpc.Call(ctx, c.Principal(), f.Method, f.Data)
	if err != nil {
		return err
	}
	c.SendEvent(protocol.RPCResult{Ref: f.Ref, Method: f.Method, Data: data})
	return nil
}
