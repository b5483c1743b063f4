package ratelimit

import "github.com/chatd/chatd/errcode"

// ErrLimited is what a caller that wants an error instead of a bool may wrap
// for a refused check (errcode.RateLimited): Allow itself reports refusal
// with ok == false.
var ErrLimited = errcode.New(errcode.RateLimited, "ratelimit: rate limited")
