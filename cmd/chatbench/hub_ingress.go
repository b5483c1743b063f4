package main

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
)

// The bare hub's ingress comes in two shapes (?ingress=):
//
// sync (the default, and the fan-out scenario's): the connection's reader
// decodes a say and PUBLISHes it itself, waiting for Redis before it reads
// the next frame, so a sender has one say in flight. chatd does not take
// says that way, and a hub that does is not a limit for chatd: under load
// its reader waits on Redis while chatd's does not.
//
// pipe: the reader decodes a say, builds its frame and queues it (at most
// hubSayQueue waiting; then the reader waits, and TCP pushes back on the
// client, as chatd's Say does at maxQueuedSays); one say worker per
// connection takes everything queued, up to hubSayBatch, and sends it as
// one pipeline of PUBLISHes, then acks each in order — chatd's say worker
// (realtime/send.go: maxSayBatch says of a client in one round trip), less
// what chatd does besides (seat check, rate limit, idempotency, XADD).
// This is the anchor of the rooms50 scenario.

const (
	hubSayQueue = 128 // says waiting per connection (chatd: maxQueuedSays)
	hubSayBatch = 64  // says per pipeline (chatd: maxSayBatch)
)

// hubSay is one queued say: its room, its ref and the message frame every
// member gets.
type hubSay struct {
	room, ref, id string
	frame         []byte
}

// queueSay hands s to the connection's say worker, waiting while the queue
// is full; false when the client is closed meanwhile.
func (c *hubClient) queueSay(s hubSay) bool {
	select {
	case c.says <- s:
		return true
	case <-c.done:
		return false
	}
}

// sayWorker is the connection's say worker (ingress=pipe): it takes what
// is queued (up to hubSayBatch), PUBLISHes it in one pipeline, and acks
// or refuses each say in order, until the client is closed.
func (h *hub) sayWorker(ctx context.Context, c *hubClient, finished chan<- struct{}) {
	defer close(finished)
	batch := make([]hubSay, 0, hubSayBatch)
	for {
		select {
		case s := <-c.says:
			batch = append(batch[:0], s)
		case <-c.done:
			return
		}
	drain:
		for len(batch) < hubSayBatch {
			select {
			case s := <-c.says:
				batch = append(batch, s)
			default:
				break drain
			}
		}
		for n := int64(len(batch)); ; {
			if cur := h.maxBatch.Load(); n <= cur || h.maxBatch.CompareAndSwap(cur, n) {
				break
			}
		}
		cmds, _ := h.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, s := range batch {
				p.Publish(ctx, "hub:"+s.room, s.frame)
			}
			return nil
		})
		for i, s := range batch {
			var err error
			if i < len(cmds) {
				err = cmds[i].Err()
			} else {
				err = context.Canceled
			}
			switch {
			case err != nil:
				c.enqueue(mustEncode(protocol.ErrorEvent{Code: errcode.RedisUnavailable, Message: err.Error(), Room: s.room, Ref: s.ref}))
			case s.ref != "":
				c.enqueue(mustEncode(protocol.Ack{Ref: s.ref, ID: s.id, Room: s.room}))
			}
		}
		clear(batch) // let the frames go
	}
}
