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
	// HookData is what the connect hook attached to this connection
	// (hello's data), JSON; "" = none. (A string keeps Principal
	// comparable.)
	HookData string
}

// Guest reports whether p is a guest session (its name is claimed).
func (p Principal) Guest() bool { return p.Holder != "" }

// GuestTTL is the longest a guest's own keys live after its last write
// (its seen filter, its follows, its presence record, a board only guests
// posted to): a guest who never comes back leaves nothing in Redis after a
// day. A registered user's keys keep their longer lifetimes.
const GuestTTL = 24 * time.Hour

// Life is how long p's own keys may live at most: GuestTTL for a guest,
// 0 (each package's own default) for a registered user.
func (p Principal) Life() time.Duration {
	if p.Guest() {
		return GuestTTL
	}
	return 0
}
