package ranking

import (
	"errors"

	"github.com/chatd/chatd/errcode"
)

// Sentinel errors. Calls wrap them with the operation and the name concerned;
// compare with errors.Is. Bad board and player names wrap names.ErrBadName.
var (
	// ErrBadScore: not a JSON number, NaN, ±Inf, more than three decimals,
	// a magnitude above 1e15, or an incr whose result would leave that range.
	ErrBadScore = errcode.New(errcode.BadValue, "ranking: bad score")
	// ErrBadMode: a mode other than best, incr, set (or empty for best).
	ErrBadMode = errcode.New(errcode.BadValue, "ranking: unknown mode")
	// ErrBadLimit: a limit outside 1..MaxLimit.
	ErrBadLimit = errcode.New(errcode.BadRequest, "ranking: limit out of range")
	// ErrBadRadius: a radius outside 0..MaxRadius.
	ErrBadRadius = errcode.New(errcode.BadRequest, "ranking: radius out of range")
	// ErrBatchTooLarge: more than MaxBatch players in one Ranks call.
	ErrBatchTooLarge = errcode.New(errcode.TooLarge, "ranking: too many players in one batch")
	// ErrUnknownPlayer: the player has no score on the board (in its current
	// period for a periodic board).
	ErrUnknownPlayer = errcode.New(errcode.UnknownPlayer, "ranking: unknown player")
	// ErrBoardFull: the board's post counter ran out of its 15 digits
	// (10^15 score changes in one board or period).
	ErrBoardFull = errors.New("ranking: board sequence exhausted")
)
