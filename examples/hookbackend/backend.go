package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// replayWindow is how far a request's X-Chatd-Timestamp may be from this
// backend's clock (docs/PROTOCOL.md, "Hooks": 5 minutes).
const replayWindow = 5 * time.Minute

// Backend is the application's side of chatd's hooks: it checks every
// request's signature and timestamp, then answers the hook named by the
// path (/connect, /join, /publish, /match, /rpc).
type Backend struct {
	// Secrets verify X-Chatd-Signature; a request signed with any of them
	// passes (chatd signs with each of its --hook-secret values).
	Secrets []string
	// Banned words refuse a message (publish).
	Banned []string
	// Members may join the lobbies whose names start with "vip-" (join);
	// every other lobby is open.
	Members []string
	// GameServers is the host the match hook hands out game servers on.
	GameServers string
	// Now is the clock; nil = time.Now.
	Now func() time.Time

	mu      sync.Mutex
	matches map[string]json.RawMessage // event id → the answer given (a match hook retried gets the same)
	next    int                        // the next game server's number
}

// reply is a hook's answer: {} allows; deny refuses with a reason; data
// and text are the hook's own.
type reply struct {
	Deny *deny  `json:"deny,omitempty"`
	Data any    `json:"data,omitempty"`
	Text string `json:"text,omitempty"`
}

type deny struct {
	Reason string `json:"reason"`
}

func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "cannot read the body", http.StatusBadRequest)
		return
	}
	if err := b.verify(r.Header.Get("X-Chatd-Timestamp"), r.Header.Get("X-Chatd-Signature"), body); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var out reply
	switch strings.TrimPrefix(r.URL.Path, "/") {
	case "connect":
		out, err = b.connect(body)
	case "join":
		out, err = b.join(body)
	case "publish":
		out, err = b.publish(body)
	case "match":
		var raw json.RawMessage
		raw, err = b.match(r.Header.Get("Idempotency-Key"), body)
		if err == nil {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(raw)
			return
		}
	case "rpc":
		out, err = b.rpc(body)
	default:
		http.NotFound(w, r)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// verify checks X-Chatd-Signature ("v1=<hex>,v1=<hex>", one HMAC-SHA256
// of "timestamp.body" per chatd secret) against every secret of the
// backend, and the timestamp against the replay window.
func (b *Backend) verify(ts, header string, body []byte) error {
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("no X-Chatd-Timestamp")
	}
	now := time.Now
	if b.Now != nil {
		now = b.Now
	}
	if d := now().Sub(time.Unix(sec, 0)); d > replayWindow || d < -replayWindow {
		return fmt.Errorf("stale timestamp: %s from this backend's clock", d.Round(time.Second))
	}
	for _, sig := range strings.Split(header, ",") {
		got, ok := strings.CutPrefix(strings.TrimSpace(sig), "v1=")
		if !ok {
			continue
		}
		gotMAC, err := hex.DecodeString(got)
		if err != nil {
			continue
		}
		for _, s := range b.Secrets {
			m := hmac.New(sha256.New, []byte(s))
			m.Write([]byte(ts))
			m.Write([]byte("."))
			m.Write(body)
			if hmac.Equal(gotMAC, m.Sum(nil)) {
				return nil
			}
		}
	}
	return fmt.Errorf("bad signature")
}

func (b *Backend) connect(body []byte) (reply, error) {
	var req struct {
		User  string `json:"user"`
		Guest bool   `json:"guest"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return reply{}, err
	}
	if strings.HasPrefix(strings.ToLower(req.User), "banned") {
		return reply{Deny: &deny{Reason: "this account is suspended"}}, nil
	}
	tier := "free"
	if b.member(req.User) {
		tier = "vip"
	}
	return reply{Data: map[string]string{"tier": tier}}, nil
}

func (b *Backend) member(user string) bool {
	for _, m := range b.Members {
		if strings.EqualFold(m, user) {
			return true
		}
	}
	return false
}

func (b *Backend) join(body []byte) (reply, error) {
	var req struct {
		User  string `json:"user"`
		Lobby string `json:"lobby"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return reply{}, err
	}
	if strings.HasPrefix(req.Lobby, "vip-") && !b.member(req.User) {
		return reply{Deny: &deny{Reason: "lobby " + req.Lobby + " is for VIP members"}}, nil
	}
	return reply{}, nil
}

func (b *Backend) publish(body []byte) (reply, error) {
	var req struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return reply{}, err
	}
	lower := strings.ToLower(req.Text)
	for _, w := range b.Banned {
		if strings.Contains(lower, strings.ToLower(w)) {
			return reply{Deny: &deny{Reason: "your message contains a word that is not allowed here"}}, nil
		}
	}
	return reply{}, nil
}

// match hands out a game server for the match; the answer is kept by the
// event id, so chatd's retry of the same match gets the same server.
func (b *Backend) match(id string, body []byte) (json.RawMessage, error) {
	var req struct {
		Match   string   `json:"match"`
		Players []string `json:"players"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if raw, ok := b.matches[id]; ok {
		return raw, nil
	}
	if b.matches == nil {
		b.matches = map[string]json.RawMessage{}
	}
	b.next++
	raw, _ := json.Marshal(reply{Data: map[string]any{"server": fmt.Sprintf("gs-%d.%s:7777", b.next, b.GameServers), "match": req.Match}})
	b.matches[id] = raw
	return raw, nil
}

func (b *Backend) rpc(body []byte) (reply, error) {
	var req struct {
		User   string          `json:"user"`
		Method string          `json:"method"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return reply{}, err
	}
	switch req.Method {
	case "roll":
		var in struct {
			Sides int `json:"sides"`
		}
		if len(req.Data) > 0 {
			_ = json.Unmarshal(req.Data, &in)
		}
		if in.Sides == 0 {
			in.Sides = 6
		}
		if in.Sides < 2 || in.Sides > 1000 {
			return reply{Deny: &deny{Reason: "sides must be 2 to 1000"}}, nil
		}
		return reply{Data: map[string]any{"user": req.User, "sides": in.Sides, "roll": 1 + rand.IntN(in.Sides)}}, nil
	}
	return reply{Deny: &deny{Reason: "unknown method " + strconv.Quote(req.Method)}}, nil
}
