package web

import (
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
)

// statusOf is the one table of the transport: the HTTP status of each
// documented error code (docs/PROTOCOL.md, "Errors"). The codes themselves
// are defined, and carried by the errors, where the rules that produce them
// live (package errcode); nothing here looks at an error's text.
var statusOf = map[errcode.Code]int{
	errcode.BadJSON:            http.StatusBadRequest,
	errcode.BadRequest:         http.StatusBadRequest,
	errcode.BadName:            http.StatusBadRequest,
	errcode.BadValue:           http.StatusBadRequest,
	errcode.UnknownSetting:     http.StatusBadRequest,
	errcode.TooLong:            http.StatusBadRequest,
	errcode.UnknownType:        http.StatusBadRequest,
	errcode.BadToken:           http.StatusUnauthorized,
	errcode.Forbidden:          http.StatusForbidden,
	errcode.NotSeated:          http.StatusForbidden,
	errcode.Muted:              http.StatusForbidden,
	errcode.Banned:             http.StatusForbidden,
	errcode.NotFound:           http.StatusNotFound,
	errcode.UnknownRoom:        http.StatusNotFound,
	errcode.UnknownPlayer:      http.StatusNotFound,
	errcode.UnknownItem:        http.StatusNotFound,
	errcode.UnknownMessage:     http.StatusNotFound,
	errcode.UnknownQueue:       http.StatusNotFound,
	errcode.UnknownTicket:      http.StatusNotFound,
	errcode.MethodNotAllowed:   http.StatusMethodNotAllowed,
	errcode.Timeout:            http.StatusRequestTimeout,
	errcode.NameTaken:          http.StatusConflict,
	errcode.RoomFull:           http.StatusConflict,
	errcode.SeatedElsewhere:    http.StatusConflict,
	errcode.ResumeGap:          http.StatusConflict,
	errcode.SoldOut:            http.StatusConflict,
	errcode.InsufficientFunds:  http.StatusConflict,
	errcode.Conflict:           http.StatusConflict,
	errcode.BoardFull:          http.StatusConflict,
	errcode.TicketOpen:         http.StatusConflict,
	errcode.ConsentRequired:    http.StatusForbidden,
	errcode.TooLarge:           http.StatusRequestEntityTooLarge,
	errcode.RateLimited:        http.StatusTooManyRequests,
	errcode.TooManyConnections: http.StatusTooManyRequests,
	errcode.Internal:           http.StatusInternalServerError,
	errcode.Busy:               http.StatusServiceUnavailable,
	errcode.RedisUnavailable:   http.StatusServiceUnavailable,
	errcode.RedisOOM:           http.StatusServiceUnavailable,
	errcode.RedisBusy:          http.StatusServiceUnavailable,
	errcode.Draining:           http.StatusServiceUnavailable,
	errcode.NotDurable:         http.StatusServiceUnavailable,
	errcode.Blocked:            http.StatusForbidden,
	errcode.NotPrivate:         http.StatusConflict,
	errcode.HookDenied:         http.StatusForbidden,
	errcode.HookUnavailable:    http.StatusServiceUnavailable,
}

// APIError is an error in the documented shape:
// {"error": {"code": "snake_case_code", "message": "…"}} with an HTTP status.
type APIError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	retry   int    // Retry-After seconds of a 429 (0 = 1)
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// ErrorCode is the error's code.
func (e *APIError) ErrorCode() errcode.Code { return errcode.Code(e.Code) }

// ClientMessage is the error's message.
func (e *APIError) ClientMessage() string { return e.Message }

// errf is a refusal of the transport itself (a bad header, a bad query):
// its status is its code's.
func errf(code errcode.Code, format string, args ...any) error {
	return errcode.Errorf(code, format, args...)
}

// Errors of the web layer itself.
var (
	errUnauthorized = errcode.Errorf(errcode.BadToken, "send a valid session token: Authorization: Bearer <token> (get one from POST /api/v1/session)")
	errAdminOnly    = errcode.Errorf(errcode.Forbidden, "this endpoint needs the admin token")
	errNoAdmin      = errcode.Errorf(errcode.Forbidden, "admin endpoints are disabled: the server was started without --admin-token")
	errReadOnly     = errcode.Errorf(errcode.Forbidden, "this is the read-only admin token (--admin-read-token): it reads every admin screen but takes no action")
	errGuestOff     = errcode.Errorf(errcode.Forbidden, "this server runs with --auth jwt: sessions come from its login service, POST /api/v1/session is off")
)

// toAPIError turns any error into the documented shape: its code (from
// the error itself, errcode.Of), the status of that code, and the sentence
// for the client (errcode.Message).
func toAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *fiber.Error
	if errors.As(err, &fe) {
		return fiberError(fe)
	}
	code := errcode.Of(err)
	status, ok := statusOf[code]
	if !ok {
		code, status = errcode.Internal, http.StatusInternalServerError
	}
	out := &APIError{Status: status, Code: string(code), Message: errcode.Message(err)}
	if d := errcode.RetryIn(err); d > 0 {
		out.retry = int(math.Ceil(d.Seconds()))
	}
	return out
}

func fiberError(fe *fiber.Error) *APIError {
	e := func(status int, code errcode.Code, msg string) *APIError {
		return &APIError{Status: status, Code: string(code), Message: msg}
	}
	switch fe.Code {
	case http.StatusNotFound:
		return e(http.StatusNotFound, errcode.NotFound, "no such endpoint; see docs/PROTOCOL.md or GET /api/v1/openapi.json")
	case http.StatusMethodNotAllowed:
		return e(http.StatusMethodNotAllowed, errcode.MethodNotAllowed, "this endpoint does not take that method")
	case http.StatusRequestEntityTooLarge:
		return e(http.StatusRequestEntityTooLarge, errcode.TooLarge, "the request body is too large")
	case http.StatusRequestHeaderFieldsTooLarge:
		return e(http.StatusRequestHeaderFieldsTooLarge, errcode.TooLarge, "the request headers are too large")
	case http.StatusRequestTimeout:
		return e(http.StatusRequestTimeout, errcode.Timeout, "the request took too long to arrive")
	}
	if fe.Code >= 500 {
		return e(http.StatusInternalServerError, errcode.Internal, "internal error; it has been logged")
	}
	return e(fe.Code, errcode.BadRequest, errcode.Sentence(fe.Message))
}

// writeError sends err in the documented shape; a 429 carries Retry-After
// (seconds, the refusal's own when it knows, else 1).
func writeError(c *fiber.Ctx, err error) error {
	ae := toAPIError(err)
	c.Set("Cache-Control", "no-store")
	if ae.Status == http.StatusTooManyRequests && c.GetRespHeader("Retry-After") == "" {
		c.Set("Retry-After", strconv.Itoa(max(1, ae.retry)))
	}
	return c.Status(ae.Status).JSON(fiber.Map{"error": ae})
}
