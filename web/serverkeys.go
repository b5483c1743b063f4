package web

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	auditlog "github.com/chatd/chatd/audit"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/rooms"
)

// The server role: API keys of the application's backend (chatd
// --server-keys), distinct from the admin tokens. A key has a name (what
// the audit log and the metrics say; never the secret), scopes, optionally
// a list of lobbies it is limited to, and a request rate. Requests carry
// the secret as a bearer token (Authorization: Bearer <secret>); it is
// compared with every key's in constant time, as the admin tokens are.

// Server API scopes: what a key may do (ServerKey.Scopes).
const (
	ScopePublish    = "publish"    // POST /server/rooms/{room}/messages
	ScopeBroadcast  = "broadcast"  // POST /server/lobbies/{lobby}/messages
	ScopePresence   = "presence"   // GET /server/presence/{user}
	ScopeDisconnect = "disconnect" // POST /server/users/{user}/disconnect
	ScopeGrant      = "grant"      // PUT and DELETE /server/rooms/{room}/access/{user}
)

// ServerScopes are every scope, in the order the docs list them.
var ServerScopes = []string{ScopePublish, ScopeBroadcast, ScopePresence, ScopeDisconnect, ScopeGrant}

// DefaultServerKeyRate is a key's request rate when its spec names none:
// requests a second, as many at once.
const DefaultServerKeyRate = 50

// ServerKey is one API key of the server role.
type ServerKey struct {
	// Name names the key in the audit log: 1–32 of [A-Za-z0-9_-].
	Name string
	// Secret is the bearer token: 24–256 of [A-Za-z0-9_.~+/=-].
	Secret string
	// Scopes are what the key may do (ServerScopes); at least one.
	Scopes []string
	// Lobbies, when not empty, limit the key's room and lobby operations
	// (publish, broadcast, grant) to these lobbies: a name, or a prefix
	// ending in "*" ("mm.duel.*", a queue's match rooms). Presence and
	// disconnect are user-wide: the scopes alone govern them. Empty = every
	// lobby.
	Lobbies []string
	// Rate is the requests a second the key may make (as many at once),
	// over every node; 0 = DefaultServerKeyRate.
	Rate float64
}

// ParseServerKey reads one key of --server-keys:
//
//	name:secret:scope+scope[:lobbies=lobby+prefix*][:rate=N]
//
// scopes from ServerScopes, or "*" for all; lobbies and rate optional, in
// either order. The error never holds the secret.
func ParseServerKey(spec string) (ServerKey, error) {
	parts := strings.Split(strings.TrimSpace(spec), ":")
	if len(parts) < 3 || len(parts) > 5 {
		return ServerKey{}, fmt.Errorf("expected name:secret:scopes[:lobbies=a+b][:rate=N]")
	}
	k := ServerKey{Name: parts[0], Secret: parts[1]}
	if !validToken(k.Name, 32) {
		return ServerKey{}, fmt.Errorf("key name %q: expected 1–32 of [A-Za-z0-9_-]", clipText(k.Name, 40))
	}
	if !validSecret(k.Secret) {
		return ServerKey{}, fmt.Errorf("key %s: the secret must be 24–256 of [A-Za-z0-9_.~+/=-]", k.Name)
	}
	for _, s := range strings.Split(parts[2], "+") {
		switch {
		case s == "*":
			k.Scopes = append(k.Scopes, ServerScopes...)
		case slices.Contains(ServerScopes, s):
			k.Scopes = append(k.Scopes, s)
		default:
			return ServerKey{}, fmt.Errorf("key %s: scope %q: expected %s or *", k.Name, clipText(s, 40), strings.Join(ServerScopes, ", "))
		}
	}
	slices.Sort(k.Scopes)
	k.Scopes = slices.Compact(k.Scopes)
	for _, opt := range parts[3:] {
		name, val, _ := strings.Cut(opt, "=")
		switch name {
		case "lobbies":
			for _, l := range strings.Split(val, "+") {
				if names.Lobby(strings.TrimSuffix(l, "*")) != nil {
					return ServerKey{}, fmt.Errorf("key %s: lobby %q: expected a lobby name, or a prefix of one ending in *", k.Name, clipText(l, 70))
				}
				k.Lobbies = append(k.Lobbies, l)
			}
		case "rate":
			r, err := strconv.ParseFloat(val, 64)
			if err != nil || !(r >= 0.01 && r <= 100000) {
				return ServerKey{}, fmt.Errorf("key %s: rate %q: expected requests a second, 0.01 to 100000", k.Name, clipText(val, 20))
			}
			k.Rate = r
		default:
			return ServerKey{}, fmt.Errorf("key %s: %q: expected lobbies=… or rate=…", k.Name, clipText(name, 20))
		}
	}
	return k, nil
}

// validSecret reports whether s is 24–256 of [A-Za-z0-9_.~+/=-].
func validSecret(s string) bool {
	if len(s) < 24 || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.~+/=-", c) >= 0) {
			return false
		}
	}
	return true
}

// CheckServerKeys checks a server's keys: each well formed, names and
// secrets unique, no secret an admin token. Errors name keys, never
// their secrets.
func CheckServerKeys(keys []ServerKey, adminTokens ...string) error {
	for i, k := range keys {
		if len(k.Scopes) == 0 || !validToken(k.Name, 32) || !validSecret(k.Secret) {
			return fmt.Errorf("web: server key %d (%q): a name, a secret and a scope are required (ParseServerKey)", i, k.Name)
		}
		for _, o := range keys[:i] {
			if o.Name == k.Name {
				return fmt.Errorf("web: server key %q is named twice", k.Name)
			}
			if o.Secret == k.Secret {
				return fmt.Errorf("web: server keys %q and %q have the same secret", o.Name, k.Name)
			}
		}
		for _, t := range adminTokens {
			if t != "" && t == k.Secret {
				return fmt.Errorf("web: server key %q has an admin token's secret (a token is one role)", k.Name)
			}
		}
	}
	return nil
}

// can reports whether the key has scope.
func (k *ServerKey) can(scope string) bool { return slices.Contains(k.Scopes, scope) }

// inLobby reports whether the key may act in lobby.
func (k *ServerKey) inLobby(lobby string) bool {
	if len(k.Lobbies) == 0 {
		return true
	}
	for _, l := range k.Lobbies {
		if p, ok := strings.CutSuffix(l, "*"); ok && strings.HasPrefix(lobby, p) || l == lobby {
			return true
		}
	}
	return false
}

func (k *ServerKey) rate() float64 {
	if k.Rate <= 0 {
		return DefaultServerKeyRate
	}
	return k.Rate
}

// serverKey returns the key whose secret tok is, or nil: every key is
// compared, each in constant time, so the time taken says nothing of
// which key (or how much of one) matched.
func (h *authAPI) serverKey(tok string) *ServerKey {
	if tok == "" {
		return nil
	}
	var found *ServerKey
	for i := range h.serverKeys {
		if sameSecret(tok, h.serverKeys[i].Secret) && found == nil {
			found = &h.serverKeys[i]
		}
	}
	return found
}

const localServerKey = "serverKey"

// roleServer is the audit log's role of a server API key (a list of its
// own there: a busy backend pushes no admin entry out).
const roleServer = auditlog.RoleServer

var (
	errNoServerKeys = errcode.Errorf(errcode.Forbidden, "the server API is disabled: the server was started without --server-keys")
	errServerOnly   = errcode.Errorf(errcode.Forbidden, "this endpoint needs a server API key (--server-keys), not a user's or an admin's token")
)

// requireServer admits the server API's requests of scope: a key with
// that scope (403 forbidden without it, or outside the key's lobbies),
// within the key's rate (429 rate_limited). Every request a key makes is
// in the audit log, with the key's name and the answer, refusals
// included. A user's or an admin's token is 403, anything else 401; a
// server without keys answers 403.
func (h *authAPI) requireServer(scope string, limits limiter) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if len(h.serverKeys) == 0 {
			return errNoServerKeys
		}
		tok := bearer(c)
		k := h.serverKey(tok)
		if k == nil {
			if h.adminRole(tok) != "" {
				return errServerOnly
			}
			if _, err := h.tokens.verify(tok); err == nil {
				return errServerOnly
			}
			return errf(errcode.BadToken, "send a server API key: Authorization: Bearer <key>")
		}
		c.Locals(localServerKey, k)
		err := h.admitServer(c, k, scope, limits)
		if err == nil {
			err = c.Next()
		}
		h.recordActor(c, "key "+k.Name, roleServer, err)
		return err
	}
}

// limiter takes a request of a key's rate (serverapi.ServerAPI.Allow).
type limiter func(c *fiber.Ctx, name string, perSecond float64) error

func (h *authAPI) admitServer(c *fiber.Ctx, k *ServerKey, scope string, limits limiter) error {
	if !k.can(scope) {
		return errcode.Errorf(errcode.Forbidden, "the key %s has no %s scope (it has: %s)", k.Name, scope, strings.Join(k.Scopes, ", "))
	}
	lobby := c.Params("lobby")
	if room := c.Params("room"); room != "" {
		l, _, err := rooms.ParseRoom(room)
		if err != nil {
			return err
		}
		lobby = l
	}
	if lobby != "" && !k.inLobby(lobby) {
		return errcode.Errorf(errcode.Forbidden, "the key %s may not act in lobby %s (its lobbies: %s)", k.Name, clipText(lobby, 64), strings.Join(k.Lobbies, ", "))
	}
	return limits(c, k.Name, k.rate())
}

// serverKeyOf is the key that admitted c (requireServer).
func serverKeyOf(c *fiber.Ctx) *ServerKey {
	k, _ := c.Locals(localServerKey).(*ServerKey)
	return k
}
