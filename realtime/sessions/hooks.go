package sessions

import (
	"context"

	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/realtime"
)

// Connect runs the application's connect hook (package hooks) for a
// realtime connection of p opening over transport ("websocket" or
// "sse"), after the rest of the admission: it returns p with the data the
// backend attached (hello's data), or the refusal — a *hooks.DeniedError
// (hook_denied, with the backend's reason) or hooks.ErrUnavailable
// (hook_unavailable: the backend did not answer and the hook fails
// closed). With the hook off it returns p at once.
func (s *Sessions) Connect(ctx context.Context, p realtime.Principal, transport string) (realtime.Principal, error) {
	if !s.hooks.On(hooks.Connect) {
		return p, nil
	}
	data, err := s.hooks.Connect(ctx, hooks.ConnectRequest{User: p.User, Session: p.Session, Guest: p.Guest(), Addr: p.Addr, Transport: transport})
	if err != nil {
		return p, err
	}
	p.HookData = string(data)
	return p, nil
}
