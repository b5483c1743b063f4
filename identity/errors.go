package identity

import "github.com/chatd/chatd/errcode"

// Errors returned by this package, wrapped with the operation and the name
// ("identity: claim alice: identity: name is taken"); compare them with
// errors.Is, read their code with errcode.Of. A malformed name or holder
// id wraps names.ErrBadName.
var (
	// ErrNameTaken is returned by Claim when another holder has the name
	// (errcode.NameTaken: the web layer answers 409 name_taken).
	ErrNameTaken = errcode.New(errcode.NameTaken, "identity: name is taken")

	// ErrNotHolder is returned by Admit when another holder has the name:
	// the token's holder lost it by being idle for the claim TTL, and
	// another guest claimed it since. Nothing was changed in Redis; the
	// request carrying that token must be refused (errcode.BadToken, 401).
	// Its whole text is the client's sentence (errcode.Errorf), since it
	// holds a colon that errcode.Message would otherwise cut at.
	ErrNotHolder = errcode.Errorf(errcode.BadToken, "This session has ended: the name was taken by another guest after being idle; sign in again")

	// ErrSignedOut is returned by Admit and Claim for a holder that signed
	// out (Release) while its token was valid: the token is refused on
	// every node until it expires, even after Redis lost its data
	// (errcode.BadToken, 401).
	ErrSignedOut = errcode.Errorf(errcode.BadToken, "This session was signed out; sign in again")

	// ErrBadEvent is returned by DecodeEvent for bytes that are not an
	// Event.
	ErrBadEvent = errcode.New(errcode.BadRequest, "identity: malformed event")

	// ErrBadExpiry is returned by Release without the token's expiry.
	ErrBadExpiry = errcode.New(errcode.BadRequest, "identity: the token's expiry is required")

	// ErrStarted is returned by Start when the Registry was started already.
	ErrStarted = errcode.New(errcode.Internal, "identity: already started")
)
