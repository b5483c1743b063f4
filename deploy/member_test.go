package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"github.com/chatd/chatd/internal/wsclient"
	"github.com/chatd/chatd/protocol"
)

// member is a chat user as docs/PROTOCOL.md describes one: a session token from
// POST /api/v1/session, a WebSocket through the balancer, join/say/resume
// frames. It records every message it receives, so a test can check that
// nothing acked is missing, nothing came twice, and ids came in order.
//
// It is a client of its own rather than the Go SDK (package client) on
// purpose: the SDK resumes by itself and drops every message whose id is
// not after the last one it delivered for the room (it counts them in
// ConnStats.Duplicates), so a member built on it could never see the
// duplicates and the disorder these tests assert the server does not
// send, and could not choose when, where and after which id to resume. (core_test.go's peer
// and abuse_test.go's raw dials stay for the same reason: they look at
// frames, close codes and refusals before the upgrade.)
type member struct {
	t     testing.TB
	c     *cluster
	user  string
	token string

	conn *wsConn // current connection; only the goroutine driving m uses it

	mu       sync.Mutex
	got      map[string]int    // message id → times received
	last     map[string]string // room → last message id received
	disorder []string          // messages that came after a later id
	presence []presenceEvent   // presence frames received
	nodes    []string          // node of each connection, in order
	closes   []int             // close code of each connection that ended
	refusals map[string]int    // error code → count, for says
	acked    []string          // ids of this member's acked says
	gaps     []time.Duration   // how long each reconnect took, resume included
}

type presenceEvent struct{ Room, User, State string }

// frame is any server → client frame; room and message differ in shape by
// type, so they stay raw.
type frame struct {
	Type    string          `json:"type"`
	User    string          `json:"user"`
	Node    string          `json:"node"`
	Room    json.RawMessage `json:"room"`
	Ref     string          `json:"ref"`
	ID      string          `json:"id"`
	Code    string          `json:"code"`
	Message json.RawMessage `json:"message"`
	State   string          `json:"state"`
}

type chatMessage struct {
	ID   string `json:"id"`
	Room string `json:"room"`
	From string `json:"from"`
	Text string `json:"text"`
}

// wsConn is one WebSocket connection and its reader goroutine, which
// records messages and presence itself and passes every other frame on
// events (closed when the connection ends).
type wsConn struct {
	ws     *wsclient.Conn
	node   string
	events chan frame
}

var (
	errClosed   = errors.New("connection closed")
	errNoAnswer = errors.New("no answer within 5s")
)

// refusal is an error frame answering a client frame.
type refusal struct{ code string }

func (r refusal) Error() string { return "refused: " + r.code }

func newMember(ctx context.Context, c *cluster, user string) *member {
	c.t.Helper()
	m := &member{
		t: c.t, c: c, user: user,
		token:    c.session(ctx, user),
		got:      map[string]int{},
		last:     map[string]string{},
		refusals: map[string]int{},
	}
	c.t.Cleanup(m.close)
	return m
}

// connect opens a WebSocket through the balancer, retrying while the
// balancer has no node to give, and waits for hello.
func (m *member) connect(ctx context.Context) error {
	u := url.URL{Scheme: "ws", Host: m.c.lb, Path: "/ws", RawQuery: "token=" + url.QueryEscape(m.token)}
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	for {
		ws, resp, err := wsclient.Dial(ctx, u.String(), &wsclient.Options{Dialer: d, Buffer: 1024})
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		if err == nil {
			m.conn = &wsConn{ws: ws, events: make(chan frame, 1024)}
			go m.read(m.conn)
			var f frame
			if f, err = m.next(ctx, "hello"); err == nil {
				m.conn.node = f.Node
				m.mu.Lock()
				m.nodes = append(m.nodes, f.Node)
				m.mu.Unlock()
				return nil
			}
			_ = ws.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: connect: %w (last: %v)", m.user, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// handshake opens and closes a WebSocket with an Origin header, as a
// browser would, and returns the handshake's HTTP status.
func (m *member) handshake(ctx context.Context, origin string) int {
	u := url.URL{Scheme: "ws", Host: m.c.lb, Path: "/ws", RawQuery: "token=" + url.QueryEscape(m.token)}
	d := &websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	ws, resp, err := wsclient.Dial(ctx, u.String(), &wsclient.Options{Dialer: d, Header: http.Header{"Origin": {origin}}})
	if err == nil {
		_ = ws.Close()
	}
	if resp == nil {
		return 0
	}
	if resp.Body != nil {
		_ = resp.Body.Close()
	}
	return resp.StatusCode
}

// read takes the events of one connection (internal/wsclient reads and
// decodes them): it records messages and presence, passes the rest on.
func (m *member) read(c *wsConn) {
	defer close(c.events)
	for ev := range c.ws.Events() {
		switch e := ev.ServerEvent.(type) {
		case nil:
			m.t.Errorf("%s: undecodable frame %q: %v", m.user, ev.Raw, c.ws.Bad())
		case protocol.MessageEvent:
			m.onMessage(chatMessage{ID: e.Message.ID, Room: e.Message.Room, From: e.Message.From, Text: e.Message.Text})
		case protocol.Presence:
			m.mu.Lock()
			m.presence = append(m.presence, presenceEvent{e.Room, e.User, e.State})
			m.mu.Unlock()
		case protocol.Settings, protocol.Notice:
		default:
			var f frame
			_ = json.Unmarshal(ev.Raw, &f)
			c.events <- f
		}
	}
	m.mu.Lock()
	m.closes = append(m.closes, c.ws.CloseCode())
	m.mu.Unlock()
}

func (m *member) onMessage(msg chatMessage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got[msg.ID]++
	if last := m.last[msg.Room]; msg.ID <= last {
		m.disorder = append(m.disorder, fmt.Sprintf("%s after %s", msg.ID, last))
		return
	}
	m.last[msg.Room] = msg.ID
}

// next returns the next frame of type typ, skipping others; an error frame
// with a ref ends the wait as a refusal, one without is counted and
// skipped. It returns errClosed when the connection ends.
func (m *member) next(ctx context.Context, typ string) (frame, error) {
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case f, ok := <-m.conn.events:
			if !ok {
				return f, errClosed
			}
			if f.Type == typ {
				return f, nil
			}
			if f.Type == "error" {
				m.refused(f.Code)
				if f.Ref == "" {
					continue
				}
				return f, refusal{f.Code}
			}
		case <-timeout.C:
			return frame{}, errNoAnswer
		case <-ctx.Done():
			return frame{}, ctx.Err()
		}
	}
}

func (m *member) refused(code string) {
	m.mu.Lock()
	m.refusals[code]++
	m.mu.Unlock()
}

func (m *member) send(f protocol.ClientFrame) error {
	p, err := protocol.EncodeFrame(f)
	if err != nil {
		return err
	}
	_ = m.conn.ws.WS().SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := m.conn.ws.SendRaw(websocket.TextMessage, p); err != nil {
		return fmt.Errorf("%w: %v", errClosed, err)
	}
	return nil
}

// join joins a lobby and returns the room it was seated in.
func (m *member) join(ctx context.Context, lobby string) (roomInfo, error) {
	if err := m.send(protocol.Join{Lobby: lobby, Ref: "join-" + lobby}); err != nil {
		return roomInfo{}, err
	}
	f, err := m.next(ctx, "joined")
	if err != nil {
		return roomInfo{}, fmt.Errorf("%s: join %s: %w", m.user, lobby, err)
	}
	var r roomInfo
	if err := json.Unmarshal(f.Room, &r); err != nil {
		return r, fmt.Errorf("%s: joined frame: %w", m.user, err)
	}
	return r, nil
}

// say sends text with a fresh ref and waits for its ack (the message id) or
// its error.
func (m *member) say(ctx context.Context, room, text, ref string) (string, error) {
	if err := m.send(protocol.Say{Room: room, Text: text, Ref: ref}); err != nil {
		return "", err
	}
	for {
		f, err := m.next(ctx, "ack")
		if err != nil {
			var r refusal
			if errors.As(err, &r) && f.Ref != ref {
				continue // an answer to an earlier frame
			}
			return "", err
		}
		if f.Ref != ref {
			continue
		}
		m.mu.Lock()
		m.acked = append(m.acked, f.ID)
		m.mu.Unlock()
		return f.ID, nil
	}
}

// resume asks for what room sent after the last message m received, on the
// current connection, and waits for joined.
func (m *member) resume(ctx context.Context, room string) error {
	m.mu.Lock()
	after := m.last[room]
	m.mu.Unlock()
	if err := m.send(protocol.Resume{Room: room, After: after, Ref: "resume-" + room}); err != nil {
		return err
	}
	_, err := m.next(ctx, "joined")
	return err
}

// reconnect drops the current connection, connects again through the
// balancer and resumes room, retrying until ctx ends.
func (m *member) reconnect(ctx context.Context, room string) error {
	start := time.Now()
	defer func() {
		m.mu.Lock()
		m.gaps = append(m.gaps, time.Since(start))
		m.mu.Unlock()
	}()
	for {
		if m.conn != nil {
			_ = m.conn.ws.Close()
			for range m.conn.events { // let the reader finish
			}
		}
		if err := m.connect(ctx); err != nil {
			return err
		}
		err := m.resume(ctx, room)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errClosed) && !errors.Is(err, errNoAnswer) {
			return fmt.Errorf("%s: resume %s: %w", m.user, room, err)
		}
	}
}

// retried are the error codes a say may be refused with and then retried:
// not_seated while a moved connection's seat is taken back, rate_limited. A
// say refused with any other code ends the chat with an error.
var retried = map[string]bool{"not_seated": true, "rate_limited": true}

// chat says numbered lines in room until it has `want` acks (0 = no bound)
// or stop closes, pausing between lines; a lost connection is reconnected
// and resumed. Says refused with a code in retried are counted (refusals)
// and retried with a new ref; any other refusal is returned.
func (m *member) chat(ctx context.Context, room string, want int, stop <-chan struct{}, pause time.Duration) error {
	for seq := 1; ; seq++ {
		if want > 0 && m.ackCount() >= want {
			return nil
		}
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%s: chat: %w", m.user, ctx.Err())
		default:
		}
		_, err := m.say(ctx, room, fmt.Sprintf("%s line %d", m.user, seq), fmt.Sprintf("%s-%d", m.user, seq))
		var r refusal
		switch {
		case err == nil:
		case errors.As(err, &r):
			if !retried[r.code] {
				return fmt.Errorf("%s: say refused with %s, which is not retried: %w", m.user, r.code, err)
			}
		case errors.Is(err, errClosed), errors.Is(err, errNoAnswer):
			if err := m.reconnect(ctx, room); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: say: %w", m.user, err)
		}
		time.Sleep(pause)
	}
}

func (m *member) ackCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.acked)
}

func (m *member) ackedIDs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.acked...)
}

// missing returns the ids m has not received.
func (m *member) missing(ids []string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, id := range ids {
		if m.got[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// duplicates returns the ids m received more than once.
func (m *member) duplicates() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for id, n := range m.got {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s×%d", id, n))
		}
	}
	sort.Strings(out)
	return out
}

func (m *member) received() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.got)
}

func (m *member) outOfOrder() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.disorder...)
}

func (m *member) node() string { return m.conn.node }

func (m *member) close() {
	if m.conn != nil {
		_ = m.conn.ws.Close()
	}
}

// summary describes m for failure messages and logs.
func (m *member) summary() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	gaps := make([]string, len(m.gaps))
	for i, g := range m.gaps {
		gaps[i] = g.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%s: nodes %v, closes %v, reconnects took %v, acked %d, received %d, refusals %v",
		m.user, m.nodes, m.closes, gaps, len(m.acked), len(m.got), m.refusals)
}

// sawPresence reports whether m was told that user's state in room changed
// to state.
func (m *member) sawPresence(room, user, state string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.presence {
		if p == (presenceEvent{room, user, state}) {
			return true
		}
	}
	return false
}

// closeCodes returns the close code of each connection of m that ended
// (1006 when it ended without a close frame).
func (m *member) closeCodes() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int(nil), m.closes...)
}
