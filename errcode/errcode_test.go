package errcode_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/errcode"
)

var errFull = errcode.New(errcode.RoomFull, "rooms: room is full")

type limited struct{}

func (limited) Error() string           { return "rooms: saying too fast: retry after 1.2s" }
func (limited) ErrorCode() errcode.Code { return errcode.RateLimited }
func (limited) ClientMessage() string   { return "you are sending too fast; wait 1.2 s" }

type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

func TestOfAndMessage(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code errcode.Code
		msg  string
	}{
		{"a sentinel alone", errFull, errcode.RoomFull, "Room is full"},
		{"a wrapped sentinel", fmt.Errorf("rooms: resume general-3 as al: %w", errFull), errcode.RoomFull, "Room is full"},
		{"a sentinel with detail", fmt.Errorf("rooms: join: %w: 50 of 50 seats taken", errFull), errcode.RoomFull, "50 of 50 seats taken"},
		{"Errorf keeps its whole text", fmt.Errorf("web: %w", errcode.Errorf(errcode.BadRequest, "wait must be 0 to %d: got %q", 30, "x")), errcode.BadRequest, `wait must be 0 to 30: got "x"`},
		{"a setting key keeps its case", errcode.Errorf(errcode.BadValue, "rate.messages_per_second must be > 0"), errcode.BadValue, "rate.messages_per_second must be > 0"},
		{"a typed error words its own message", fmt.Errorf("x: %w", limited{}), errcode.RateLimited, "You are sending too fast; wait 1.2 s"},
		{"a refused connection", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, errcode.RedisUnavailable, "The data store is unavailable; retry in a moment"},
		{"a timeout", fmt.Errorf("rooms: send: %w", context.DeadlineExceeded), errcode.RedisUnavailable, "The data store is unavailable; retry in a moment"},
		{"a pool timeout", redis.ErrPoolTimeout, errcode.RedisUnavailable, "The data store is unavailable; retry in a moment"},
		{"LOADING", replyErr("LOADING Redis is loading the dataset in memory"), errcode.RedisUnavailable, "The data store is unavailable; retry in a moment"},
		{"MOVED", replyErr("MOVED 3999 127.0.0.1:6381"), errcode.RedisUnavailable, "The data store is unavailable; retry in a moment"},
		{"OOM", fmt.Errorf("x: %w", replyErr("OOM command not allowed when used memory > 'maxmemory'.")), errcode.RedisOOM, "The data store is out of memory; retry later"},
		{"BUSY", replyErr("BUSY Redis is busy running a script."), errcode.RedisBusy, "The data store is busy; retry in a moment"},
		{"a script's own error reply", replyErr("ERR user_script:1: bad"), errcode.Internal, "Internal error; it has been logged"},
		{"anything else", errors.New("boom: secret detail"), errcode.Internal, "Internal error; it has been logged"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.code, errcode.Of(tc.err))
			assert.Equal(t, tc.msg, errcode.Message(tc.err))
			assert.True(t, errcode.Is(tc.err, tc.code))
		})
	}
	assert.Equal(t, errcode.Code(""), errcode.Of(nil))
	assert.True(t, errcode.Unavailable(replyErr("OOM x")))
	assert.False(t, errcode.Unavailable(errFull))
}
