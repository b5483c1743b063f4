package web

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
)

// A realtime connection — a WebSocket (ws.go) or an event stream (sse.go)
// — is admitted, opened and ended here, one way for both:
//
//	admit    the token, the session, the transport's own check, the
//	         user's connections on this node, a lease of the client
//	         address (refusals are HTTP errors: the connection never opens)
//	open     Chat.Connect or Chat.Stream takes the lease over; when Chat
//	         refuses, the lease goes back and the transport closes with
//	         closeOf's code
//	finish   Chat.Disconnect, once the client has finished
//
// The transports differ only in where the token comes from, in what they
// check of the request, and in how they carry events.

// admitted is a connection that passed admit: who it acts as, and the
// connection lease of its client address (Sessions.AdmitConn), which is
// the caller's to hand to open or to give back with release.
type admitted struct {
	p     realtime.Principal
	lease string
}

// Refusal reasons of admit, as chatd_ws_refused_total counts them.
const (
	refusedToken       = "token"
	refusedTooMany     = "too_many"
	refusedFromAddr    = "too_many_from_addr"
	refusedNodeFull    = "node_full"
	refusedHook        = "hook" // the connect hook (package hooks)
	releaseConnTimeout = 5 * time.Second
)

// admit runs the admission every realtime connection passes, in this
// order: the session token raw (bad_token 401 with hint, which says where
// to send it), the session (Sessions.Admit: not banned, a guest still
// holding the name), check (the transport's own reading of the request;
// nil = none), the user's connections on this node (Chat.CanConnect), and
// a connection lease of the client address (Sessions.AdmitConn: the
// per-address and per-node caps). A refusal comes with the reason it is
// counted under (refusedToken, …).
func (h *streamAPI) admit(c *fiber.Ctx, raw, hint string, check func() error) (admitted, string, error) {
	p, err := h.tokens.verify(raw)
	if err != nil {
		return admitted{}, refusedToken, errf(errcode.BadToken, "%s", hint)
	}
	p.Addr = h.ip.clientIP(c)
	ctx := c.UserContext()
	if err := h.sessions.Admit(ctx, p); err != nil {
		return admitted{}, refusedToken, err
	}
	if check != nil {
		if err := check(); err != nil {
			return admitted{}, "", err
		}
	}
	if err := h.chat.CanConnect(p.User); err != nil {
		return admitted{}, refusedTooMany, err
	}
	transport := "sse"
	if websocket.IsWebSocketUpgrade(c) {
		transport = "websocket"
	}
	if p, err = h.sessions.Connect(ctx, p, transport); err != nil {
		return admitted{}, refusedHook, err
	}
	lease, err := h.sessions.AdmitConn(ctx, p.Addr)
	if err != nil {
		if errors.Is(err, realtime.ErrNodeFull) {
			return admitted{}, refusedNodeFull, err
		}
		return admitted{}, refusedFromAddr, err
	}
	return admitted{p: p, lease: lease}, "", nil
}

// release gives back the lease of an admitted connection that never
// opened.
func (h *streamAPI) release(a admitted) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseConnTimeout)
	defer cancel()
	h.sessions.ReleaseConn(ctx, a.p.Addr, a.lease)
}

// open opens an admitted connection on t with connect (Chat.Connect or
// Chat.Stream, which take the lease over) and returns its client. When
// Chat refuses it, the lease goes back, t is closed with closeOf's code
// and reason, and open returns nil. A client that connect returns with an
// error is open, and closing: it is returned, to be finished.
func (h *streamAPI) open(a admitted, t realtime.Transport, connect func() (*realtime.Client, error)) *realtime.Client {
	cl, err := connect()
	if cl != nil {
		return cl
	}
	h.release(a)
	t.Close(closeOf(err))
	return nil
}

// closeOf is the close code and reason of a connection Chat refused to
// open: 1012 (reconnect, elsewhere) while this node drains, 1013 (try
// again later) for anything else; the reason is the error's message for
// the client (errcode.Message), as an HTTP refusal would carry it.
func closeOf(err error) (code int, reason string) {
	code = realtime.CloseTryLater
	if errors.Is(err, realtime.ErrDraining) {
		code = realtime.CloseServiceReboot
	}
	return code, errcode.Message(err)
}

// finish ends an open connection once its client has finished: Chat
// forgets it and detaches it from its rooms.
func (h *streamAPI) finish(cl *realtime.Client) {
	<-cl.Finished()
	ctx, cancel := context.WithTimeout(context.Background(), releaseConnTimeout)
	defer cancel()
	h.chat.Disconnect(ctx, cl)
}
