package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/names"
)

// Session tokens are JWTs signed with HMAC-SHA256 (HS256) by the secret all
// nodes share, so any node accepts a token minted by any other — or by an
// external login service that holds the secret. Claims:
//
//	sub  the user name (1–32 of [A-Za-z0-9_-])
//	sid  the session id: one token is one session (its poll cursor and dirty mask)
//	iss  "chatd"
//	iat, exp  issued-at and expiry (Unix seconds)
//
// The signing method is pinned to HS256 when verifying, so a token that says
// "alg": "none" or an RSA algorithm is refused.
type tokens struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

// claims are the token claims.
type claims struct {
	Session string `json:"sid"`
	Holder  string `json:"hid,omitempty"`
	jwt.RegisteredClaims
}

// session is who a request acts as. Holder is set on guest tokens: the id
// under which the guest holds the name (package identity); every session
// of one guest carries the same holder.
type session struct {
	User   string
	ID     string
	Holder string
}

// randomID is a fresh 96-bit id, hex-encoded.
func randomID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

func (t *tokens) mint(user, holder string) (string, session, error) {
	id, err := randomID()
	if err != nil {
		return "", session{}, err
	}
	s := session{User: user, ID: id, Holder: holder}
	now := t.now()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims{
		Session: s.ID,
		Holder:  holder,
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   user,
			Issuer:    "chatd",
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(t.ttl)),
		},
	})
	signed, err := tok.SignedString(t.secret)
	return signed, s, err
}

var errBadToken = errors.New("bad token")

func (t *tokens) verify(raw string) (session, error) {
	var c claims
	_, err := jwt.ParseWithClaims(raw, &c, func(*jwt.Token) (any, error) { return t.secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer("chatd"),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(t.now),
		jwt.WithLeeway(5*time.Second),
	)
	if err != nil {
		return session{}, fmt.Errorf("%w: %v", errBadToken, err)
	}
	if err := names.User(c.Subject); err != nil {
		return session{}, fmt.Errorf("%w: %v", errBadToken, err)
	}
	if c.Session == "" || len(c.Session) > 64 || names.User(c.Session) != nil {
		return session{}, fmt.Errorf("%w: missing or bad session id", errBadToken)
	}
	if len(c.Holder) > 64 || (c.Holder != "" && names.User(c.Holder) != nil) {
		return session{}, fmt.Errorf("%w: bad holder id", errBadToken)
	}
	return session{User: c.Subject, ID: c.Session, Holder: c.Holder}, nil
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

// requireUser admits requests with a valid session token of a user who is
// not banned and, for a guest, still holds the name.
func (s *Server) requireUser(c *fiber.Ctx) error {
	sess, err := s.tokens.verify(bearer(c))
	if err != nil {
		return errUnauthorized
	}
	if err := s.admit(c.UserContext(), sess); err != nil {
		return err
	}
	c.Locals(localSession, sess)
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

// admit checks a verified session: the user is not banned, and a guest's
// name is still held by its holder (renewing the claim: activity keeps a
// guest name). Both answers come from caches most of the time.
func (s *Server) admit(ctx context.Context, sess session) error {
	if err := s.node.CheckBanned(ctx, sess.User); err != nil {
		return err
	}
	if sess.Holder == "" {
		return nil // a token of the operator's login service
	}
	if err := s.node.Identity().Touch(ctx, sess.User, sess.Holder); err != nil {
		if errors.Is(err, identity.ErrNotHolder) {
			return errSessionEnded
		}
		return err
	}
	return nil
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
	return errf(http.StatusUnauthorized, "bad_token", "send the admin token: Authorization: Bearer <admin token>")
}

// sameSecret compares a presented secret with the configured one in
// constant time; comparing SHA-256 digests hides the length too.
func sameSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

func sessionOf(c *fiber.Ctx) session {
	s, _ := c.Locals(localSession).(session)
	return s
}
