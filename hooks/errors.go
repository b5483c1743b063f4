package hooks

import (
	"errors"

	"github.com/chatd/chatd/errcode"
)

// Errors of a hook call, each with the code the client gets.
var (
	// ErrDenied is matched by a *DeniedError: the backend refused.
	ErrDenied = errcode.New(errcode.HookDenied, "hooks: refused by the application")
	// ErrUnavailable is returned when a fail-closed hook's backend did not
	// answer (a timeout, a connection refused, a status other than 200, a
	// reply that is not the documented JSON, or the circuit breaker open).
	ErrUnavailable = errcode.New(errcode.HookUnavailable, "hooks: the application's backend is unavailable")
	// ErrNoRPC is returned by RPC when no rpc hook is configured.
	ErrNoRPC = errcode.New(errcode.NotFound, "hooks: this server has no rpc hook")
	// errBreakerOpen is the cause of an ErrUnavailable while the hook's
	// circuit breaker is open.
	errBreakerOpen = errors.New("circuit breaker open")
)

// DeniedError is the backend's refusal, with the reason it gave; the
// client sees code hook_denied and Reason.
type DeniedError struct {
	Hook   Name
	Reason string
}

func (e *DeniedError) Error() string {
	if e.Reason == "" {
		return "refused by the application (" + string(e.Hook) + " hook)"
	}
	return e.Reason
}

// ErrorCode is hook_denied.
func (e *DeniedError) ErrorCode() errcode.Code { return errcode.HookDenied }

// ClientMessage is the backend's reason, or a sentence naming the hook.
func (e *DeniedError) ClientMessage() string { return e.Error() }

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }
