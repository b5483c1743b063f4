package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/ratelimit"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/seen"
	"github.com/chatd/chatd/settings"
	"github.com/chatd/chatd/shop"
)

// APIError is an error in the documented shape:
// {"error": {"code": "snake_case_code", "message": "…"}} with an HTTP status.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// errf builds an APIError.
func errf(status int, code, format string, args ...any) *APIError {
	return &APIError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Errors of the web layer itself.
var (
	errUnauthorized = errf(http.StatusUnauthorized, "bad_token", "send a valid session token: Authorization: Bearer <token> (get one from POST /api/v1/session)")
	errAdminOnly    = errf(http.StatusForbidden, "forbidden", "this endpoint needs the admin token")
	errNoAdmin      = errf(http.StatusForbidden, "forbidden", "admin endpoints are disabled: the server was started without --admin-token")
	errSessionEnded = errf(http.StatusUnauthorized, "bad_token", "this session has ended (signed out, or idle too long and the name was taken); sign in again")
	errGuestOff     = errf(http.StatusForbidden, "forbidden", "this server runs with --auth jwt: sessions come from its login service, POST /api/v1/session is off")
)

// mapping is one row of the domain error table: a sentinel, its status and code.
type mapping struct {
	err    error
	status int
	code   string
}

// errorTable maps domain sentinels to the documented status and code; the
// error's own text becomes the message.
var errorTable = []mapping{
	{names.ErrBadName, http.StatusBadRequest, "bad_name"},
	{realtime.ErrDraining, http.StatusServiceUnavailable, "draining"},
	{realtime.ErrTooManyConnections, http.StatusTooManyRequests, "rate_limited"},
	{realtime.ErrEmptyText, http.StatusBadRequest, "bad_request"},
	{realtime.ErrBadUTF8, http.StatusBadRequest, "bad_request"},
	{realtime.ErrTooLong, http.StatusBadRequest, "too_long"},
	{realtime.ErrTooManyFromAddr, http.StatusTooManyRequests, "too_many_connections"},
	{realtime.ErrTooManyBoards, http.StatusTooManyRequests, "rate_limited"},
	{realtime.ErrTooManyLobbies, http.StatusTooManyRequests, "rate_limited"},
	{realtime.ErrTooManySessions, http.StatusTooManyRequests, "rate_limited"},
	{realtime.ErrTooManySeats, http.StatusTooManyRequests, "rate_limited"},
	{realtime.ErrNodeFull, http.StatusTooManyRequests, "too_many_connections"},
	{realtime.ErrMuted, http.StatusForbidden, "muted"},
	{realtime.ErrBanned, http.StatusForbidden, "banned"},
	{identity.ErrNameTaken, http.StatusConflict, "name_taken"},
	{rooms.ErrNoMessage, http.StatusNotFound, "unknown_message"},
	{rooms.ErrNotReplicated, http.StatusServiceUnavailable, "not_durable"},
	{moderation.ErrBadDuration, http.StatusBadRequest, "bad_request"},
	{moderation.ErrBadReason, http.StatusBadRequest, "bad_request"},
	{rooms.ErrRateLimited, http.StatusTooManyRequests, "rate_limited"},
	{rooms.ErrUnknownRoom, http.StatusNotFound, "unknown_room"},
	{rooms.ErrNotSeated, http.StatusForbidden, "not_seated"},
	{rooms.ErrRoomFull, http.StatusConflict, "room_full"},
	{rooms.ErrSeatedElsewhere, http.StatusConflict, "seated_elsewhere"},
	{rooms.ErrBusy, http.StatusServiceUnavailable, "busy"},
	{rooms.ErrResumeGap, http.StatusConflict, "resume_gap"},
	{rooms.ErrBadID, http.StatusBadRequest, "bad_request"},
	{rooms.ErrBadText, http.StatusBadRequest, "bad_request"},
	{lock.ErrNotObtained, http.StatusServiceUnavailable, "busy"},
	{settings.ErrUnknownSetting, http.StatusBadRequest, "unknown_setting"},
	{settings.ErrBadValue, http.StatusBadRequest, "bad_value"},
	{ranking.ErrBadScore, http.StatusBadRequest, "bad_value"},
	{ranking.ErrBadMode, http.StatusBadRequest, "bad_value"},
	{ranking.ErrBadLimit, http.StatusBadRequest, "bad_request"},
	{ranking.ErrBadRadius, http.StatusBadRequest, "bad_request"},
	{ranking.ErrBatchTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{ranking.ErrUnknownPlayer, http.StatusNotFound, "unknown_player"},
	{seen.ErrTooManyItems, http.StatusRequestEntityTooLarge, "too_large"},
	{seen.ErrBadItem, http.StatusBadRequest, "bad_value"},
	{shop.ErrUnknownItem, http.StatusNotFound, "unknown_item"},
	{shop.ErrSoldOut, http.StatusConflict, "sold_out"},
	{shop.ErrInsufficientFunds, http.StatusConflict, "insufficient_funds"},
	{shop.ErrConflict, http.StatusConflict, "conflict"},
	{shop.ErrBadValue, http.StatusBadRequest, "bad_value"},
	{shop.ErrBalanceOverflow, http.StatusBadRequest, "bad_value"},
	{shop.ErrBadIdempotencyKey, http.StatusBadRequest, "bad_request"},
	{shop.ErrIdempotencyMismatch, http.StatusBadRequest, "bad_request"},
	{notices.ErrBadText, http.StatusBadRequest, "bad_value"},
	{ratelimit.ErrLimited, http.StatusTooManyRequests, "rate_limited"},
	{dirty.ErrBadID, http.StatusBadRequest, "bad_request"},
}

// toAPIError turns any error into the documented shape: domain sentinels by
// errorTable, Redis outages to 503 redis_unavailable, the rest to 500.
func toAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fiberError(fe)
	}
	var se *settings.Error
	if errors.As(err, &se) && se.Reason != "" {
		if errors.Is(err, settings.ErrUnknownSetting) {
			return &APIError{Status: http.StatusBadRequest, Code: "unknown_setting", Message: sentence(se.Reason)}
		}
		return &APIError{Status: http.StatusBadRequest, Code: "bad_value", Message: sentence(se.Reason)}
	}
	var rl *rooms.RateLimitError
	if errors.As(err, &rl) {
		return errf(http.StatusTooManyRequests, "rate_limited", "you are sending too fast; wait %.1f s", rl.RetryAfter.Seconds())
	}
	var me *realtime.MutedError
	if errors.As(err, &me) {
		return errf(http.StatusForbidden, "muted", "you are muted until %s", me.Until.UTC().Format(time.RFC3339))
	}
	var be *realtime.BannedError
	if errors.As(err, &be) {
		return errf(http.StatusForbidden, "banned", "you are banned until %s", be.Until.UTC().Format(time.RFC3339))
	}
	var tl *realtime.TooLongError
	if errors.As(err, &tl) {
		return errf(http.StatusBadRequest, "too_long", "the message is %d characters long; at most %d are allowed", tl.Got, tl.Max)
	}
	for _, m := range errorTable {
		if errors.Is(err, m.err) {
			return &APIError{Status: m.status, Code: m.code, Message: detail(err, m.err)}
		}
	}
	if isRedisDown(err) {
		return errf(http.StatusServiceUnavailable, "redis_unavailable", "the data store is unavailable; retry in a moment")
	}
	return errf(http.StatusInternalServerError, "internal", "internal error; it has been logged")
}

func fiberError(fe *fiber.Error) *APIError {
	switch fe.Code {
	case http.StatusNotFound:
		return errf(fe.Code, "not_found", "no such endpoint; see docs/PROTOCOL.md or GET /api/v1/openapi.json")
	case http.StatusMethodNotAllowed:
		return errf(fe.Code, "method_not_allowed", "this endpoint does not take that method")
	case http.StatusRequestEntityTooLarge:
		return errf(fe.Code, "too_large", "the request body is too large")
	case http.StatusRequestHeaderFieldsTooLarge:
		return errf(fe.Code, "too_large", "the request headers are too large")
	case http.StatusBadRequest:
		return errf(fe.Code, "bad_request", "%s", sentence(fe.Message))
	case http.StatusRequestTimeout:
		return errf(fe.Code, "timeout", "the request took too long to arrive")
	}
	if fe.Code >= 500 {
		return errf(http.StatusInternalServerError, "internal", "internal error; it has been logged")
	}
	return errf(fe.Code, "bad_request", "%s", sentence(fe.Message))
}

// isRedisDown reports whether err means Redis could not be reached or did
// not answer in time, as opposed to Redis refusing a command.
func isRedisDown(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	s := err.Error()
	for _, m := range []string{"connection pool timeout", "LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY", "NOREPLICAS", "MOVED ", "ASK ", "connection refused", "i/o timeout"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}

// detail is the part of err's text after the sentinel's ("rooms: join x:
// bad name: lobby name … may only hold …" → "Lobby name … may only hold …"),
// or the sentinel's own text without its package prefix.
func detail(err, sentinel error) string {
	s, st := err.Error(), sentinel.Error()
	if i := strings.Index(s, st+": "); i >= 0 {
		return sentence(s[i+len(st)+2:])
	}
	if i := strings.LastIndex(st, ": "); i >= 0 {
		st = st[i+2:]
	}
	return sentence(st)
}

// sentence strips the package prefixes Go errors carry ("rooms: join x: …")
// down to the last, most specific part, capitalised.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "bad request"
	}
	if i := strings.IndexAny(s, " :"); i > 0 && strings.ContainsAny(s[:i], "._") {
		return s // it starts with a setting key or a name: keep its case
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// writeError sends err in the documented shape.
func writeError(c *fiber.Ctx, err error) error {
	ae := toAPIError(err)
	c.Set("Cache-Control", "no-store")
	if ae.Status == http.StatusTooManyRequests && c.GetRespHeader("Retry-After") == "" {
		c.Set("Retry-After", "1")
	}
	return c.Status(ae.Status).JSON(fiber.Map{"error": ae})
}
