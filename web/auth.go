package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	auditlog "github.com/chatd/chatd/audit"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/realtime/admin"
	"github.com/chatd/chatd/realtime/chat"
	"github.com/chatd/chatd/realtime/sessions"
)

// Session tokens are JWTs signed with HMAC-SHA256 (HS256) by the secret all
// nodes share, so any node accepts a token minted by any other — or by an
// external login service that holds the secret. Claims:
//
//	sub  the user name (1–32 of [A-Za-z0-9_-])
//	sid  the session id: one token is one session (its poll cursor and dirty mask)
//	iss  "chatd", or Config.JWTIssuer when set
//	aud  Config.JWTAudience, required when set (and any otherwise)
//	iat, exp  issued-at and expiry (Unix seconds)
//
// The signing method is pinned to HS256 when verifying, so a token that says
// "alg": "none" or an RSA algorithm is refused.
type tokens struct {
	secret   []byte
	ttl      time.Duration
	now      func() time.Time
	issuer   string // "" = "chatd"
	audience string // "" = not checked
}

func (t *tokens) aud() jwt.ClaimStrings {
	if t.audience == "" {
		return nil
	}
	return jwt.ClaimStrings{t.audience}
}

func (t *tokens) iss() string {
	if t.issuer == "" {
		return "chatd"
	}
	return t.issuer
}

// claims are the token claims.
type claims struct {
	Session string `json:"sid"`
	Holder  string `json:"hid,omitempty"`
	jwt.RegisteredClaims
}

// randomID is a fresh 96-bit id, hex-encoded.
func randomID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// mint signs a token of a new session of user (holder: the guest's holder
// id, "" for none). The session is who requests with the token act as
// (realtime.Principal); every session of one guest carries the same
// holder.
func (t *tokens) mint(user, holder string) (string, realtime.Principal, error) {
	id, err := randomID()
	if err != nil {
		return "", realtime.Principal{}, err
	}
	now := t.now()
	s := realtime.Principal{User: user, Session: id, Holder: holder, Expires: now.Add(t.ttl).Truncate(time.Second).UTC()}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		Session: s.Session,
		Holder:  holder,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   user,
			Issuer:    t.iss(),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(s.Expires),
			Audience:  t.aud(),
		},
	})
	signed, err := tok.SignedString(t.secret)
	return signed, s, err
}

var errBadToken = errors.New("bad token")

func (t *tokens) verify(raw string) (realtime.Principal, error) {
	var c claims
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(t.iss()),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(t.now),
		jwt.WithLeeway(5 * time.Second),
	}
	if t.audience != "" {
		opts = append(opts, jwt.WithAudience(t.audience))
	}
	_, err := jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return t.secret, nil }, opts...)
	if err != nil {
		return realtime.Principal{}, fmt.Errorf("%w: %v", errBadToken, err)
	}
	if !validToken(c.Subject, 32) {
		return realtime.Principal{}, fmt.Errorf("%w: bad user name", errBadToken)
	}
	if !validToken(c.Session, 64) {
		return realtime.Principal{}, fmt.Errorf("%w: missing or bad session id", errBadToken)
	}
	if c.Holder != "" && !validToken(c.Holder, 64) {
		return realtime.Principal{}, fmt.Errorf("%w: bad holder id", errBadToken)
	}
	p := realtime.Principal{User: c.Subject, Session: c.Session, Holder: c.Holder}
	if c.ExpiresAt != nil {
		p.Expires = c.ExpiresAt.Time.UTC()
	}
	return p, nil
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(c *fiber.Ctx) string {
	h := c.Get(fiber.HeaderAuthorization)
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

const localSession = "session"

// validToken reports whether s is 1 to max characters of [A-Za-z0-9_-]:
// the alphabet of user names, session and holder ids in a token (checked
// here too: a token may come from a login service).
func validToken(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// authAPI signs guests in and out (Sessions), and is the middleware that
// admits requests: a user's session token (requireUser), either admin
// token (requireAdminRead), the full admin token (requireAdmin, every
// action in the audit log).
type authAPI struct {
	mode           string // Config.Auth: "guest" or "jwt"
	tokens         *tokens
	sessions       *sessions.Sessions
	audit          auditor
	adminToken     string      // "" = the admin actions answer 403
	adminReadToken string      // "" = none
	serverKeys     []ServerKey // the server API's keys (serverkeys.go); none = it answers 403
	node           string      // this node's id, in the audit log
	ip             proxies
	log            *slog.Logger
}

// auditor keeps the admin actions' audit log (admin.Admin).
type auditor interface {
	Record(ctx context.Context, e auditlog.Entry) error
}

var _ auditor = (*admin.Admin)(nil)

// createSession answers POST /session in guest mode: a token for a guest
// name (Sessions.SignIn decides: a free name is claimed for a new holder; a
// request that carries a live token of that same guest joins its holder).
func (h *authAPI) createSession(c *fiber.Ctx) error {
	if h.mode == "jwt" {
		return errGuestOff
	}
	var req struct {
		User string `json:"user"`
	}
	if err := decodeJSON(c.Body(), &req); err != nil {
		return err
	}
	var prev *realtime.Principal
	if p, err := h.tokens.verify(bearer(c)); err == nil {
		prev = &p
	}
	holder, err := h.sessions.SignIn(c.UserContext(), h.ip.clientIP(c), req.User, prev)
	if err != nil {
		return err
	}
	user := req.User
	if prev != nil && prev.Holder == holder {
		user = prev.User // the guest's own name in another case: one guest, one display name
	}
	tok, _, err := h.tokens.mint(user, holder)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"token": tok, "user": user})
}

// deleteSession signs a guest out: the name is free again at once, and the
// guest's connections close.
func (h *authAPI) deleteSession(c *fiber.Ctx) error {
	if err := h.sessions.SignOut(c.UserContext(), principal(c)); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"ok": true})
}

// requireUser admits requests with a valid session token of a user who is
// not banned and, for a guest, still holds the name (Sessions.Admit).
func (h *authAPI) requireUser(c *fiber.Ctx) error {
	p, err := h.tokens.verify(bearer(c))
	if err != nil {
		return errUnauthorized
	}
	p.Addr = h.ip.clientIP(c)
	if err := h.sessions.Admit(c.UserContext(), p); err != nil {
		return err
	}
	c.Locals(localSession, p)
	return c.Next()
}

// requireReader admits what requireUser admits, and either admin token
// too: for the reads that need no user of their own (stats, rooms,
// presence, boards, settings), so the admin console reads with its token.
func (h *authAPI) requireReader(c *fiber.Ctx) error {
	if role := h.adminRole(bearer(c)); role != "" {
		c.Locals(localRole, role)
		return c.Next()
	}
	return h.requireUser(c)
}

// Admin roles: the full admin token acts, the read-only one only reads.
const (
	roleAdmin = "admin"
	roleRead  = "read"
)

// adminRole returns the role of tok: roleAdmin for the admin token,
// roleRead for the read-only admin token, "" for anything else. Both are
// compared in constant time.
func (h *authAPI) adminRole(tok string) string {
	switch {
	case tok == "":
		return ""
	case h.adminToken != "" && sameSecret(tok, h.adminToken):
		return roleAdmin
	case h.adminReadToken != "" && sameSecret(tok, h.adminReadToken):
		return roleRead
	}
	return ""
}

// requireAdminRead admits the admin reads (GET): the admin token or the
// read-only one. A valid user token is 403, anything else 401; a server
// with neither token answers 403.
func (h *authAPI) requireAdminRead(c *fiber.Ctx) error {
	if h.adminToken == "" && h.adminReadToken == "" {
		return errNoAdmin
	}
	tok := bearer(c)
	if role := h.adminRole(tok); role != "" {
		c.Locals(localRole, role)
		return c.Next()
	}
	if _, err := h.tokens.verify(tok); err == nil {
		return errAdminOnly
	}
	return errf(errcode.BadToken, "send the admin token: Authorization: Bearer <admin token>")
}

// requireAdmin admits the admin actions: only the admin token, compared in
// constant time. The read-only admin token is 403, a valid user token too,
// anything else 401. Every action the admin token takes — and every one
// the read-only token tried — goes to the audit log with its answer.
func (h *authAPI) requireAdmin(c *fiber.Ctx) error {
	if h.adminToken == "" {
		return errNoAdmin
	}
	tok := bearer(c)
	switch h.adminRole(tok) {
	case roleAdmin:
		c.Locals(localRole, roleAdmin)
		err := c.Next()
		h.record(c, tok, roleAdmin, err)
		return err
	case roleRead:
		h.record(c, tok, roleRead, errReadOnly)
		return errReadOnly
	}
	if _, err := h.tokens.verify(tok); err == nil {
		return errAdminOnly
	}
	return errf(errcode.BadToken, "send the admin token: Authorization: Bearer <admin token>")
}

const localRole = "adminRole"

// tokenFingerprint names an admin token in the audit log without giving it
// away: the first 8 hex digits of its SHA-256.
func tokenFingerprint(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:4])
}

// routeParam is a Fiber route parameter (":user"), written "{user}" in the
// audit log as the docs write it.
var routeParam = regexp.MustCompile(`:(\w+)`)

// auditDetailMax bounds the request body summary kept in the audit log.
const auditDetailMax = 200

// record adds the admin action of c, answered err (nil = 200), to the
// audit log; a failure to record is logged, never the request's.
func (h *authAPI) record(c *fiber.Ctx, tok, role string, err error) {
	h.recordActor(c, role+" "+tokenFingerprint(tok), role, err)
}

// recordActor adds the request of c, made by actor in role and answered
// err, to the audit log (record, and the server API's keys, by name).
func (h *authAPI) recordActor(c *fiber.Ctx, actor, role string, err error) {
	status := c.Response().StatusCode()
	if err != nil {
		status = toAPIError(err).Status
	}
	route := routeParam.ReplaceAllString(strings.TrimPrefix(c.Route().Path, "/api/v1"), "{$1}")
	var target []string
	for _, p := range c.Route().Params {
		target = append(target, c.Params(p))
	}
	if len(target) == 0 { // an action on a user named in the body (a kick, a disconnect, a grant)
		var body struct {
			User string `json:"user"`
		}
		if json.Unmarshal(c.Body(), &body) == nil && body.User != "" {
			target = append(target, clipText(body.User, 64))
		}
	}
	e := auditlog.Entry{
		Actor: actor, Role: role,
		Action: c.Method() + " " + route, Target: strings.Join(target, " "),
		Detail: clipText(string(c.Body()), auditDetailMax), Status: status, Node: h.node,
	}
	if rerr := h.audit.Record(c.UserContext(), e); rerr != nil {
		h.log.Warn("audit log: record failed", "action", e.Action, "err", rerr)
	}
}

// sameSecret compares a presented secret with the configured one in
// constant time; comparing SHA-256 digests hides the length too.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// viewer is who a read admitted by requireReader reads as: an admin (either
// token) or the session's user; the rooms' access rule takes it
// (chat.Chat.CanSee).
func viewer(c *fiber.Ctx) chat.Viewer {
	if role, _ := c.Locals(localRole).(string); role != "" {
		return chat.Viewer{Admin: true}
	}
	return chat.Viewer{User: principal(c).User}
}

// principal is who the request acts as (set by requireUser).
func principal(c *fiber.Ctx) realtime.Principal {
	p, _ := c.Locals(localSession).(realtime.Principal)
	return p
}
