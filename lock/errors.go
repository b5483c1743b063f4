package lock

import (
	"errors"

	"github.com/chatd/chatd/errcode"
)

// Errors returned by this package, wrapped with the operation and the lock
// name ("lock: acquire lobby:general: lock: not obtained"); compare them with
// errors.Is. A malformed lock name wraps names.ErrBadName.
var (
	// ErrNotObtained is returned by TryAcquire when another owner holds the
	// lock, and by Acquire when Options.Wait passed without obtaining it
	// (together with ErrNoAnswer when the wait passed with a try still out
	// after Redis had answered that the lock is held).
	ErrNotObtained = errcode.New(errcode.Busy, "lock: not obtained")

	// ErrNotHeld is returned by Refresh and Release when the lock expired or
	// another owner holds it now; nothing was changed in Redis.
	ErrNotHeld = errors.New("lock: not held")

	// ErrFenceStale is returned by FencedHSet when a newer fence has been
	// issued for the lock: someone acquired it after the writer, so the
	// write was refused.
	ErrFenceStale = errors.New("lock: fence is stale")

	// ErrNoAnswer is returned when Redis did not answer before the context
	// ended or Options.Wait passed (a hung or paused server). It is wrapped
	// together with the context's error (context.DeadlineExceeded or
	// context.Canceled), except in Acquire's ErrNotObtained above. Whether the
	// unanswered command ran is unknown: a lock it may have taken expires
	// after its ttl.
	ErrNoAnswer = errors.New("lock: no answer from redis")

	// ErrKeyNotInUnit is returned by FencedHSet when the key's hash tag is not
	// the lock name's, so the fence check and the write cannot run in one
	// script (and would land in different Redis Cluster slots).
	ErrKeyNotInUnit = errors.New("lock: key is not in the lock's hash-tag unit")
)
