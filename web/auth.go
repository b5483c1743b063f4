package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
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

// requireUser admits requests with a valid session token of a user who is
// not banned and, for a guest, still holds the name (Sessions.Admit).
func (s *Server) requireUser(c *fiber.Ctx) error {
	p, err := s.tokens.verify(bearer(c))
	if err != nil {
		return errUnauthorized
	}
	p.Addr = s.clientIP(c)
	if err := s.sessions.Admit(c.UserContext(), p); err != nil {
		return err
	}
	c.Locals(localSession, p)
	return c.Next()
}

// requireReader admits what requireUser admits, and the admin token too:
// for the reads that need no user of their own (stats, rooms, presence,
// boards, settings), so the admin console reads with its token.
func (s *Server) requireReader(c *fiber.Ctx) error {
	if s.cfg.AdminToken != "" {
		if tok := bearer(c); tok != "" && sameSecret(tok, s.cfg.AdminToken) {
			return c.Next()
		}
	}
	return s.requireUser(c)
}

// requireAdmin admits requests whose bearer token is the admin token,
// compared in constant time. A valid user token is 403, anything else 401.
func (s *Server) requireAdmin(c *fiber.Ctx) error {
	if s.cfg.AdminToken == "" {
		return errNoAdmin
	}
	tok := bearer(c)
	if tok != "" && sameSecret(tok, s.cfg.AdminToken) {
		return c.Next()
	}
	if _, err := s.tokens.verify(tok); err == nil {
		return errAdminOnly
	}
	return errf(errcode.BadToken, "send the admin token: Authorization: Bearer <admin token>")
}

// sameSecret compares a presented secret with the configured one in
// constant time; comparing SHA-256 digests hides the length too.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// principal is who the request acts as (set by requireUser).
func principal(c *fiber.Ctx) realtime.Principal {
	p, _ := c.Locals(localSession).(realtime.Principal)
	return p
}
