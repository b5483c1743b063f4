package ranking

import "github.com/chatd/chatd/errcode"

// Sentinel errors, each with its errcode. Calls wrap them with the
// operation and the name concerned; compare with errors.Is, read the code
// with errcode.Of. Bad board and player names wrap names.ErrBadName.
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
	// ErrBatchTooLarge: more than MaxBatch players in one Ranks call, or
	// boards in one GetMany call.
	ErrBatchTooLarge = errcode.New(errcode.TooLarge, "ranking: too many players in one batch")
	// ErrUnknownPlayer: the player has no score on the board (in its current
	// period for a periodic board).
	ErrUnknownPlayer = errcode.New(errcode.UnknownPlayer, "ranking: unknown player")
	// ErrBoardFull: the board takes no new player — it holds its cap of
	// players (Config.MaxPlayers; the players on it may still post) — or
	// it takes no change at all, its change counter having run out of its
	// 15 digits (10^15 score changes in one board or period). The wrapping
	// text says which.
	ErrBoardFull = errcode.New(errcode.BoardFull, "ranking: board is full")
	// ErrBadIdempotencyKey: an idempotency key that is empty where one is
	// needed, longer than MaxIdempotencyKey bytes, or holding a byte
	// outside '!'..'~'; or a scope that is not a valid user name.
	ErrBadIdempotencyKey = errcode.New(errcode.BadRequest, "ranking: bad idempotency key")
	// ErrIdempotencyMismatch: the idempotency key was used, within
	// IdempotencyTTL, for another post (another player, score or mode);
	// nothing was written.
	ErrIdempotencyMismatch = errcode.New(errcode.BadRequest, "ranking: idempotency key used for another post")
)
