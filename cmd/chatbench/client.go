package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/chatd/chatd/protocol"
)

// API is the HTTP client every scenario and anchor uses: net/http with
// keep-alive, one pool per run.
type API struct {
	hc    *http.Client
	admin string

	mu     sync.Mutex
	tokens map[string]string // user → first token: later sessions of a guest show it
}

func newAPI(conns int, admin string) *API {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 4,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &API{hc: &http.Client{Transport: tr, Timeout: 40 * time.Second}, admin: admin}
}

// APIError is an answer outside 2xx, with docs/PROTOCOL.md's error code.
type APIError struct {
	Status int
	Code   string
	Msg    string
}

func (e *APIError) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg) }

// Do sends a JSON request (body nil for none) with a bearer token ("" for
// none) and decodes a 2xx answer into out (nil to discard). It returns the
// size of the answer's body.
func (a *API) Do(ctx context.Context, method, url, token string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return len(b), err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return len(b), &APIError{resp.StatusCode, e.Error.Code, e.Error.Message}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return len(b), fmt.Errorf("%s %s: decode answer: %w", method, url, err)
		}
	}
	return len(b), nil
}

// Session creates a session for user on base and returns its token.
func (a *API) Session(ctx context.Context, base, user string) (string, error) {
	var s struct {
		Token string `json:"token"`
	}
	a.mu.Lock()
	prev := a.tokens[user]
	a.mu.Unlock()
	if _, err := a.Do(ctx, http.MethodPost, base+"/api/v1/session", prev, map[string]string{"user": user}, &s); err != nil {
		return "", fmt.Errorf("session %s: %w", user, err)
	}
	if s.Token == "" {
		return "", fmt.Errorf("session %s: empty token", user)
	}
	a.mu.Lock()
	if a.tokens == nil {
		a.tokens = map[string]string{}
	}
	if a.tokens[user] == "" {
		a.tokens[user] = s.Token
	}
	a.mu.Unlock()
	return s.Token, nil
}

// SetSetting PUTs an admin setting on base and returns the new version.
func (a *API) SetSetting(ctx context.Context, base, key string, value any) (int64, error) {
	var v struct {
		Version int64 `json:"version"`
	}
	_, err := a.Do(ctx, http.MethodPut, base+"/api/v1/settings/"+key, a.admin, map[string]any{"value": value}, &v)
	return v.Version, err
}

// ResetSetting DELETEs an admin setting (back to its default).
func (a *API) ResetSetting(ctx context.Context, base, key string) error {
	_, err := a.Do(ctx, http.MethodDelete, base+"/api/v1/settings/"+key, a.admin, nil, nil)
	return err
}

// Room and Message are the protocol's.
type (
	Room    = protocol.Room
	Message = protocol.Message
)

// Frame is one server → client event as the scenarios read it: decoded
// and checked by protocol.DecodeEvent, then flattened to the fields the
// scenarios look at (the byte scanner of scan.go reads the hot message
// events without it).
type Frame struct {
	Type    string
	Ref     string
	ID      string
	Code    string
	Key     string
	Value   any // settings: a float64 or a string
	Version int64
	User    string
	Room    Room    // joined
	RoomID  string  // presence, ack, error, left, typing
	Msg     Message // message
	ErrText string  // error
}

// decodeFrame decodes and checks p, one event.
func decodeFrame(p []byte, f *Frame) error {
	*f = Frame{}
	ev, err := protocol.DecodeEvent(p)
	if err != nil {
		return fmt.Errorf("frame %.80q: %w", p, err)
	}
	f.Type = ev.EventType()
	switch ev := ev.(type) {
	case protocol.Joined:
		f.Room, f.RoomID = ev.Room, ev.Room.ID
	case protocol.MessageEvent:
		f.Msg, f.ID, f.RoomID = ev.Message, ev.Message.ID, ev.Message.Room
	case protocol.Ack:
		f.Ref, f.ID, f.RoomID = ev.Ref, ev.ID, ev.Room
	case protocol.ErrorEvent:
		f.Code, f.ErrText, f.Ref, f.RoomID = string(ev.Code), ev.Message, ev.Ref, ev.Room
	case protocol.Presence:
		f.RoomID, f.User = ev.Room, ev.User
	case protocol.Settings:
		f.Key, f.Value, f.Version = ev.Key, ev.Value, ev.Version
	case protocol.Hello:
		f.User = ev.User
	case protocol.Left:
		f.RoomID = ev.Room
	}
	return nil
}

// parallel runs f(i) for i in [0,n) on k goroutines and returns the first
// error; it stops handing out work after an error or when ctx ends.
func parallel(ctx context.Context, n, k int, f func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range min(n, k) {
		wg.Go(func() {
			for {
				mu.Lock()
				if first != nil || next >= n || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
