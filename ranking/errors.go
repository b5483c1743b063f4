package ranking

import "errors"

// Sentinel errors. Calls wrap them with the operation and the name concerned;
// compare with errors.Is. Bad board and player names wrap names.ErrBadName.
var (
	// ErrBadScore: not a JSON number, NaN, ±Inf, more than three decimals,
	// a magnitude above 1e15, or an incr whose result would leave that range.
	ErrBadScore = errors.New("ranking: bad score")
	// ErrBadMode: a mode other than best, incr, set (or empty for best).
	ErrBadMode = errors.New("ranking: unknown mode")
	// ErrBadLimit: a limit outside 1..MaxLimit.
	ErrBadLimit = errors.New("ranking: limit out of range")
	// ErrBadRadius: a radius outside 0..MaxRadius.
	ErrBadRadius = errors.New("ranking: radius out of range")
	// ErrBatchTooLarge: more than MaxBatch players in one Ranks call.
	ErrBatchTooLarge = errors.New("ranking: too many players in one batch")
	// ErrUnknownPlayer: the player has no score on the board (in its current
	// period for a periodic board).
	ErrUnknownPlayer = errors.New("ranking: unknown player")
	// ErrBoardFull: the board's post counter ran out of its 15 digits
	// (10^15 score changes in one board or period).
	ErrBoardFull = errors.New("ranking: board sequence exhausted")
)
