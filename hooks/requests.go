package hooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxData is the largest data a connect or match reply may attach (it
// travels in every hello or matched event); a larger one is a failure of
// the backend.
const MaxData = 16 << 10

// MatchAnswerTTL is how long a match hook's answer is kept for the
// matcher's retries of the same match.
const MatchAnswerTTL = 24 * time.Hour

// ConnectRequest is the connect hook's request: a WebSocket or an event
// stream is opening.
type ConnectRequest struct {
	envelope
	User    string `json:"user"`
	Session string `json:"session"`
	Guest   bool   `json:"guest"`
	// Addr is the client's address (as the node's trusted proxies tell it).
	Addr string `json:"addr"`
	// Transport is "websocket" or "sse".
	Transport string `json:"transport"`
}

// Connect asks the backend whether the connection of r may open. It
// returns the data the backend attached (for hello; nil = none), or the
// error to refuse with: a *DeniedError, or ErrUnavailable when the hook
// fails closed. With the hook off it returns nil, nil.
func (h *Hooks) Connect(ctx context.Context, r ConnectRequest) (json.RawMessage, error) {
	if !h.On(Connect) {
		return nil, nil
	}
	r.envelope = h.envelope(Connect, NewEventID())
	rep, err := h.call(ctx, Connect, r.ID, r)
	if err == nil && len(rep.Data) > MaxData {
		err = fmt.Errorf("%w: connect hook: data over %d bytes", ErrUnavailable, MaxData)
	}
	if err = h.decide(Connect, err); err != nil || rep.Deny != nil {
		return nil, err
	}
	return rep.Data, nil
}

// JoinRequest is the join hook's request: a user takes a seat in a lobby
// (a WebSocket join or a REST join).
type JoinRequest struct {
	envelope
	User    string `json:"user"`
	Session string `json:"session"`
	Lobby   string `json:"lobby"`
}

// Join asks the backend whether r's user may take a seat in r.Lobby. It
// returns nil (allowed, the hook off, out of its scope, or failed open),
// a *DeniedError, or ErrUnavailable (failed closed).
func (h *Hooks) Join(ctx context.Context, r JoinRequest) error {
	if !h.Applies(Join, r.Lobby) {
		return nil
	}
	r.envelope = h.envelope(Join, NewEventID())
	_, err := h.call(ctx, Join, r.ID, r)
	return h.decide(Join, err)
}

// PublishRequest is the publish hook's request: a message is about to be
// stored (a WebSocket say or a REST post).
type PublishRequest struct {
	envelope
	User    string `json:"user"`
	Session string `json:"session"`
	Room    string `json:"room"`
	Lobby   string `json:"lobby"`
	Text    string `json:"text"`
	// Ref is the client's own id of the message (a say's ref, a post's
	// Idempotency-Key), "" = none; the event id is made from it, so a
	// client re-sending the same message is the same event.
	Ref string `json:"ref,omitempty"`
}

// Publish asks the backend about the message of r before it is stored. It
// returns the text to store (r.Text, or the backend's replacement), or a
// *DeniedError, or ErrUnavailable (failed closed). Out of its scope, off,
// or failed open it returns r.Text.
func (h *Hooks) Publish(ctx context.Context, r PublishRequest) (string, error) {
	if !h.Applies(Publish, r.Lobby) {
		return r.Text, nil
	}
	id := NewEventID()
	if r.Ref != "" {
		sum := sha256.Sum256([]byte(r.Session + "\x00" + r.Room + "\x00" + r.Ref))
		id = hex.EncodeToString(sum[:16])
	}
	r.envelope = h.envelope(Publish, id)
	rep, err := h.call(ctx, Publish, r.ID, r)
	if err = h.decide(Publish, err); err != nil {
		return "", err
	}
	if rep.Deny == nil && rep.Text != nil {
		return *rep.Text, nil
	}
	return r.Text, nil
}

// MatchRequest is the match hook's request: a match formed.
type MatchRequest struct {
	envelope
	Match   string        `json:"match"`
	Queue   string        `json:"queue"`
	Room    string        `json:"room"`
	Players []string      `json:"players"`
	Tickets []MatchTicket `json:"tickets"`
}

// MatchTicket is one ticket of a match: a player alone or a party.
type MatchTicket struct {
	ID      string   `json:"id"`
	Players []string `json:"players"`
}

// matchAnswer is what is kept of a match hook's answer.
type matchAnswer struct {
	Data json.RawMessage `json:"data,omitempty"`
}

// Match tells the backend of a formed match and returns the data its
// players' matched events carry (nil = none). The event id is the match's
// id, and the first answer is kept (MatchAnswerTTL): called again for the
// same match, Match returns that answer without asking again, so every
// announcement of a match carries the same data. A backend's deny is
// taken as an answer without data (a formed match cannot be refused).
// Failing closed it returns ErrUnavailable and keeps nothing (the matcher
// calls again after a backoff); failing open it keeps "no data". Off or
// out of scope it returns nil, nil.
func (h *Hooks) Match(ctx context.Context, r MatchRequest) (json.RawMessage, error) {
	if !h.Applies(Match, r.Queue) {
		return nil, nil
	}
	key := matchAnswerKey(h.ks, r.Queue+":"+r.Match)
	if a, ok, err := h.matchAnswer(ctx, key); err != nil {
		return nil, err
	} else if ok {
		return a.Data, nil
	}
	r.envelope = h.envelope(Match, "match-"+r.Queue+"-"+r.Match)
	rep, err := h.call(ctx, Match, r.ID, r)
	if errors.Is(err, ErrDenied) {
		err = nil
	}
	if err == nil && len(rep.Data) > MaxData {
		err = fmt.Errorf("%w: match hook: data over %d bytes", ErrUnavailable, MaxData)
	}
	if err = h.decide(Match, err); err != nil {
		return nil, err
	}
	a := matchAnswer{Data: rep.Data}
	raw, _ := json.Marshal(a)
	set, err := h.cfg.Redis.SetNX(ctx, key, raw, MatchAnswerTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("hooks: keep the answer of match %s: %w", r.Match, err)
	}
	if !set { // another call of the same match answered first: tell its data
		if a, ok, err := h.matchAnswer(ctx, key); err != nil || ok {
			return a.Data, err
		}
	}
	return a.Data, nil
}

func (h *Hooks) matchAnswer(ctx context.Context, key string) (matchAnswer, bool, error) {
	raw, err := h.cfg.Redis.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return matchAnswer{}, false, nil
	}
	if err != nil {
		return matchAnswer{}, false, fmt.Errorf("hooks: read a match's answer: %w", err)
	}
	var a matchAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return matchAnswer{}, false, fmt.Errorf("hooks: a match's answer: %w", err)
	}
	return a, true, nil
}

// RPCRequest is the rpc hook's request: a client's call.
type RPCRequest struct {
	envelope
	User    string          `json:"user"`
	Session string          `json:"session"`
	Method  string          `json:"method"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// RPC forwards a client's call to the backend and returns its answer's
// data (nil = none). It returns ErrNoRPC when the hook is off, a
// *DeniedError when the backend refused, ErrUnavailable when it did not
// answer (rpc always fails closed: there is no answer to give). A call is
// never sent twice.
func (h *Hooks) RPC(ctx context.Context, r RPCRequest) (json.RawMessage, error) {
	if !h.On(RPC) {
		return nil, ErrNoRPC
	}
	r.envelope = h.envelope(RPC, NewEventID())
	rep, err := h.call(ctx, RPC, r.ID, r)
	if err = h.decide(RPC, err); err != nil {
		return nil, err
	}
	return rep.Data, nil
}

func (h *Hooks) envelope(n Name, id string) envelope {
	return envelope{Hook: n, ID: id, Node: h.cfg.Node, TS: h.cfg.Now().UnixMilli()}
}
