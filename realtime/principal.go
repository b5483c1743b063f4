package realtime

import "time"

// Principal is who a request, a WebSocket or a poll acts as: the user,
// the session (one token is one session: its poll cursor and dirty mask),
// the guest holder id under which a guest holds the name ("" for tokens of
// the operator's login service), when the token expires, and the client
// address (per-address caps).
type Principal struct {
	User    string
	Session string
	Holder  string
	Expires time.Time
	Addr    string
}

// Guest reports whether p is a guest session (its name is claimed).
func (p Principal) Guest() bool { return p.Holder != "" }
