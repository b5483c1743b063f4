package redismetrics

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/errcode"
)

// Kind classifies a command's error for chatd_redis_errors_total: "" for
// no error (nil, redis.Nil, the caller's cancellation), else timeout,
// network, oom, busy, moved, noscript, reply or other (see the package
// doc). OOM and BUSY are errcode's RedisOOM and RedisBusy; errcode's
// RedisUnavailable is split here into timeout, network, moved and reply,
// which an operator tells apart (a slow server, a dead one, a resharding, a
// replica promoted).
func Kind(err error) string {
	if err == nil || errors.Is(err, redis.Nil) || errors.Is(err, context.Canceled) {
		return ""
	}
	var reply redis.Error
	isReply := errors.As(err, &reply)
	if isReply {
		word, _, _ := strings.Cut(reply.Error(), " ")
		switch word {
		case "MOVED", "ASK":
			return "moved"
		case "NOSCRIPT":
			return "noscript"
		}
	}
	switch errcode.Of(err) {
	case errcode.RedisOOM:
		return "oom"
	case errcode.RedisBusy:
		return "busy"
	}
	if isReply {
		return "reply"
	}
	if timedOut(err) {
		return "timeout"
	}
	if errcode.Of(err) == errcode.RedisUnavailable {
		return "network"
	}
	return "other"
}

func timedOut(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
