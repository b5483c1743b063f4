package errcode

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// redisCode classifies a failure to reach or use Redis; "" for anything
// else (a script's own error, a bug).
func redisCode(err error) Code {
	var re redis.Error
	if errors.As(err, &re) {
		// A RESP error reply: its first word is its code.
		word, _, _ := strings.Cut(re.Error(), " ")
		switch word {
		case "OOM":
			return RedisOOM
		case "BUSY":
			return RedisBusy
		case "LOADING", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "READONLY", "NOREPLICAS", "MOVED", "ASK":
			return RedisUnavailable
		}
		if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) {
			return RedisUnavailable
		}
		return ""
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return RedisUnavailable
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return RedisUnavailable
	}
	return ""
}

// Unavailable reports whether err means Redis could not serve (down, slow,
// failing over, out of memory, busy): the request may succeed if retried
// later, and for a write, may or may not have been applied.
func Unavailable(err error) bool {
	switch redisCode(err) {
	case RedisUnavailable, RedisOOM, RedisBusy:
		return true
	}
	return false
}
