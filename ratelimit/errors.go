package ratelimit

import "errors"

// ErrLimited is what a caller that wants an error instead of a bool may wrap
// for a refused check: Allow itself reports refusal with ok == false.
var ErrLimited = errors.New("ratelimit: rate limited")
