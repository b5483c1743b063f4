package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
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

// Room is docs/PROTOCOL.md's Room.
type Room struct {
	ID       string   `json:"id"`
	Lobby    string   `json:"lobby"`
	Seq      int      `json:"seq"`
	Capacity int      `json:"capacity"`
	Members  []string `json:"members"`
}

// Message is docs/PROTOCOL.md's Message.
type Message struct {
	ID   string `json:"id"`
	Room string `json:"room"`
	From string `json:"from"`
	Text string `json:"text"`
	TS   string `json:"ts"`
}

// Frame is one server → client WebSocket frame, fully decoded: fields whose
// JSON type depends on the frame type are decoded by type into Room, RoomID,
// Msg and ErrText.
type Frame struct {
	Type    string          `json:"type"`
	User    string          `json:"user"`
	Node    string          `json:"node"`
	Motd    string          `json:"motd"`
	Ref     string          `json:"ref"`
	ID      string          `json:"id"`
	Code    string          `json:"code"`
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Version int64           `json:"version"`
	State   string          `json:"state"`
	Text    string          `json:"text"`
	RawRoom json.RawMessage `json:"room"`
	RawMsg  json.RawMessage `json:"message"`

	Room    Room    `json:"-"` // joined
	RoomID  string  `json:"-"` // presence
	Msg     Message `json:"-"` // message
	ErrText string  `json:"-"` // error
}

// decodeFrame decodes p completely, by frame type.
func decodeFrame(p []byte, f *Frame) error {
	*f = Frame{}
	if err := json.Unmarshal(p, f); err != nil {
		return fmt.Errorf("frame %.80q: %w", p, err)
	}
	var err error
	switch f.Type {
	case "joined":
		err = json.Unmarshal(f.RawRoom, &f.Room)
	case "presence":
		err = json.Unmarshal(f.RawRoom, &f.RoomID)
	case "message":
		err = json.Unmarshal(f.RawMsg, &f.Msg)
	case "error":
		if len(f.RawMsg) > 0 {
			err = json.Unmarshal(f.RawMsg, &f.ErrText)
		}
	case "":
		err = errors.New("no type")
	}
	if err != nil {
		return fmt.Errorf("%s frame %.80q: %w", f.Type, p, err)
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
