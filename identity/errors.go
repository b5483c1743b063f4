package identity

import (
	"github.com/chatd/chatd/errcode"
)

// Errors returned by this package, wrapped with the operation and the name
// ("identity: claim alice: identity: name is taken"); compare them with
// errors.Is. A malformed name or session id wraps names.ErrBadName.
var (
	// ErrNameTaken is returned by Claim when another live session holds the
	// name. The web layer answers 409 name_taken.
	ErrNameTaken = errcode.New(errcode.NameTaken, "identity: name is taken")

	// ErrNotHolder is returned by Touch and Release when the session no
	// longer holds the name: its claim expired, was released, or another
	// session claimed the name since. Nothing was changed in Redis. A
	// request carrying that session's token must be refused.
	ErrNotHolder = errcode.New(errcode.BadToken, "identity: session does not hold the name")
)
