package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// SignIn signs in as the guest user (POST /session) and keeps the token:
// later calls act as user. A name another guest holds is ErrNameTaken;
// over the per-address cap ErrRateLimited; a banned user ErrBanned; a
// server running --auth jwt answers ErrForbidden.
//
// If the Client already holds a live token of the same guest, the new
// session joins that guest (a second device): see NewSession, which
// leaves c's session alone.
func (c *Client) SignIn(ctx context.Context, user string) error {
	tok, name, err := c.signIn(ctx, user, c.Token())
	if err != nil {
		return err
	}
	c.setToken(tok, name)
	return nil
}

func (c *Client) signIn(ctx context.Context, user, holder string) (token, name string, err error) {
	var out struct {
		Token string `json:"token"`
		User  string `json:"user"`
	}
	// Not safe to repeat: a session whose answer was lost holds the name,
	// and a second request would be refused with name_taken.
	err = c.do(ctx, call{method: http.MethodPost, path: path("session"), body: map[string]string{"user": user}, out: &out, token: &holder})
	return out.Token, out.User, err
}

// NewSession returns a Client with a new session of c's guest: a second
// device holding the same name, with a poll cursor of its own
// (POST /session with c's token). c keeps its session.
func (c *Client) NewSession(ctx context.Context) (*Client, error) {
	tok, name, err := c.signIn(ctx, c.User(), c.Token())
	if err != nil {
		return nil, err
	}
	d := c.WithToken(tok)
	d.setToken(tok, name)
	return d, nil
}

// SignOut ends the guest's sessions (DELETE /session): the name is free at
// once, every token of the guest is refused from now on and its
// WebSockets close with 4000 (ErrSessionEnded).
func (c *Client) SignOut(ctx context.Context) error {
	return c.do(ctx, call{method: http.MethodDelete, path: path("session"), safe: true})
}

// Lobbies lists lobbies, most users online first; limit 0 takes the
// server's default (50), at most 500.
func (c *Client) Lobbies(ctx context.Context, limit int) ([]LobbyInfo, error) {
	var out struct {
		Lobbies []LobbyInfo `json:"lobbies"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("lobbies"), query: limitQuery("limit", limit), out: &out, safe: true})
	return out.Lobbies, err
}

// Join takes a seat in lobby for this session (REST; a WebSocket joins
// with Conn.Join): the lowest-numbered room with a free seat, or the room
// the user holds there already. From now on the session's poll returns the
// room's messages; poll at least once per seat.lease_seconds to keep it.
func (c *Client) Join(ctx context.Context, lobby string) (Room, error) {
	var out struct {
		Room Room `json:"room"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("lobbies", lobby, "join"), out: &out, safe: true})
	return out.Room, err
}

// Rooms lists the rooms of lobby by number (none for an unknown lobby).
func (c *Client) Rooms(ctx context.Context, lobby string) ([]Room, error) {
	var out struct {
		Rooms []Room `json:"rooms"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("lobbies", lobby, "rooms"), out: &out, safe: true})
	return out.Rooms, err
}

// Room reads one room; ErrUnknownRoom if there is none.
func (c *Client) Room(ctx context.Context, id string) (Room, error) {
	var out struct {
		Room Room `json:"room"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("rooms", id), out: &out, safe: true})
	return out.Room, err
}

// Leave frees the user's seat in room, for all its connections and
// sessions (also fine when not seated).
func (c *Client) Leave(ctx context.Context, room string) error {
	return c.do(ctx, call{method: http.MethodPost, path: path("rooms", room, "leave"), safe: true})
}

// Post sends a message to a room the user is seated in (ErrNotSeated
// otherwise; ErrMuted, ErrTooLong, ErrRateLimited).
//
// Each call sends a fresh Idempotency-Key (or the one of
// WithIdempotencyKey) and repeats it on every retry, so a retry after a
// lost answer stores the message once on servers that deduplicate message
// posts by key (a server that does not stores a retried post again).
func (c *Client) Post(ctx context.Context, room, text string, opts ...CallOption) (Message, error) {
	var out struct {
		Message Message `json:"message"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("rooms", room, "messages"),
		body: map[string]string{"text": text}, out: &out, safe: true, key: idemKey(opts)})
	return out.Message, err
}

// HistoryOptions select messages of History.
type HistoryOptions struct {
	After string // only messages after this id ("" = the latest ones)
	Limit int    // at most this many; 0 = the server's default (100), at most 1000
}

// History returns messages of room, oldest first: the latest Limit, or the
// ones after After. ErrResumeGap when After is no longer in the history.
func (c *Client) History(ctx context.Context, room string, o HistoryOptions) ([]Message, error) {
	q := limitQuery("limit", o.Limit)
	if o.After != "" {
		q.Set("after", o.After)
	}
	var out struct {
		Messages []Message `json:"messages"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("rooms", room, "messages"), query: q, out: &out, safe: true})
	return out.Messages, err
}

// MarkRead records that the user read room up to message id; the mark
// never moves backwards.
func (c *Client) MarkRead(ctx context.Context, room, id string) error {
	return c.do(ctx, call{method: http.MethodPost, path: path("rooms", room, "read"), body: map[string]string{"id": id}, safe: true})
}

// Unread returns, for each room the user is seated in, the number of
// messages after the user's read mark (capped at 1,000).
func (c *Client) Unread(ctx context.Context) (map[string]int, error) {
	var out struct {
		Rooms map[string]int `json:"rooms"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("unread"), out: &out, safe: true})
	return out.Rooms, err
}

// Presence returns where user is online.
func (c *Client) Presence(ctx context.Context, user string) (Presence, error) {
	var out Presence
	err := c.do(ctx, call{method: http.MethodGet, path: path("presence", user), out: &out, safe: true})
	return out, err
}

// Stats returns the global counters.
func (c *Client) Stats(ctx context.Context) (Stats, error) {
	var out Stats
	err := c.do(ctx, call{method: http.MethodGet, path: path("stats"), out: &out, safe: true})
	return out, err
}

// limitQuery is {name: n} for n > 0, else empty.
func limitQuery(name string, n int) url.Values {
	q := url.Values{}
	if n > 0 {
		q.Set(name, strconv.Itoa(n))
	}
	return q
}
