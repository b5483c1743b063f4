package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/contrib/websocket"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/wsframe"
	"github.com/chatd/chatd/protocol"
)

// The bare hub is the anchor for chatd's real-time path (A3, A4): the same
// frames on the same Fiber + contrib/websocket stack, with the least work
// around them. Each connection has a reader, a writer and a bounded queue,
// like chatd; seats are a counter (in memory, or INCR in Redis), a say is
// broadcast locally (A3) or PUBLISHed and fanned out by every hub that has
// members of the room (A4). It checks nothing: no auth, limits or history.
//
// How its writer writes is chosen per connection (?write=, hubWriteModes):
// naive, one WriteMessage (a write system call and a deadline) per frame;
// coalesce, everything queued framed by hand into one buffer and written
// in one system call with one deadline, one frame per event, as chatd's
// wsConn does; batch, the same with consecutive events newline-joined in
// one frame (up to 64 KiB), as chatd does for ?batch=1. The coalescing
// modes are the limit a server on this stack can reach; the naive one is
// what the stack gives without that work, kept as context.
//
// How it takes says is chosen per connection too (?ingress=, see
// hub_ingress.go): sync, one PUBLISH on the reader per say, or pipe, a say
// queue per connection drained by a worker that pipelines PUBLISHes, as
// chatd's say worker does.

const (
	hubCapacity = 50
	hubQueue    = 256
)

// hubWrite is how a bare hub connection's writer writes (?write=).
type hubWrite int

const (
	writeNaive    hubWrite = iota // one WriteMessage per frame
	writeCoalesce                 // everything queued in one write, one frame per event
	writeBatch                    // everything queued in one write, events newline-joined per frame
)

// hubWriteModes names the modes as ?write= spells them.
var hubWriteModes = map[string]hubWrite{"naive": writeNaive, "coalesce": writeCoalesce, "batch": writeBatch}

type hubClient struct {
	conn *websocket.Conn
	raw  net.Conn // coalescing modes: the writer frames by hand onto it
	wmu  sync.Mutex
	wake func() // makes the reader return (the writer gave up)
	mode hubWrite
	user string
	cap  int // seats per room, from ?cap= (default hubCapacity)
	send chan []byte
	says chan hubSay // ingress=pipe: the say worker's queue; nil: sync
	done chan struct{}
	once sync.Once
}

func (c *hubClient) close() { c.once.Do(func() { close(c.done) }) }

func (c *hubClient) enqueue(p []byte) {
	select {
	case c.send <- p:
	default:
		c.close() // too slow: drop it, as chatd does
	}
}

type hub struct {
	node  string
	rdb   *redis.Client
	ps    *redis.PubSub
	seq   atomic.Int64
	mu    sync.RWMutex
	rooms map[string]map[*hubClient]struct{}
	seats map[string]int // lobby → seats given (no Redis)
	subs  map[string]chan struct{}
	// ingress=pipe: the most says one pipeline carried (what tests read)
	maxBatch atomic.Int64
}

// runHub serves the bare hub on addr until ctx ends.
func runHub(ctx context.Context, addr, redisAddr, node string) error {
	return newHub(node).run(ctx, addr, redisAddr)
}

// newHub returns a hub named node, serving nothing yet (run serves it).
func newHub(node string) *hub {
	return &hub{node: node, rooms: map[string]map[*hubClient]struct{}{}, seats: map[string]int{}, subs: map[string]chan struct{}{}}
}

// run serves h on addr, on the Redis at redisAddr ("" for none), until
// ctx ends.
func (h *hub) run(ctx context.Context, addr, redisAddr string) error {
	node := h.node
	if redisAddr != "" {
		h.rdb = redis.NewClient(&redis.Options{Addr: redisAddr, PoolSize: 32})
		h.ps = h.rdb.Subscribe(ctx)
		go h.receive(ctx)
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/healthz", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"ok": true, "node": node}) })
	app.Post("/api/v1/session", func(c *fiber.Ctx) error {
		var req struct {
			User string `json:"user"`
		}
		if err := json.Unmarshal(c.Body(), &req); err != nil || req.User == "" {
			return c.Status(400).JSON(fiber.Map{"error": fiber.Map{"code": "bad_json", "message": "send {\"user\": name}"}})
		}
		return c.JSON(fiber.Map{"token": req.User, "user": req.User})
	})
	app.Get("/ws", websocket.New(func(conn *websocket.Conn) { h.serve(ctx, conn) }))
	go func() { <-ctx.Done(); _ = app.ShutdownWithTimeout(2 * time.Second) }()
	err := app.Listen(addr)
	if h.rdb != nil {
		h.ps.Close()
		h.rdb.Close()
	}
	return err
}

func (h *hub) serve(ctx context.Context, conn *websocket.Conn) {
	c := &hubClient{conn: conn, user: conn.Query("token"), cap: hubCapacity, send: make(chan []byte, hubQueue), done: make(chan struct{})}
	c.wake = func() { _ = conn.SetReadDeadline(time.Now()) }
	if n, err := strconv.Atoi(conn.Query("cap")); err == nil && n > 0 {
		c.cap = n
	}
	if m, ok := hubWriteModes[conn.Query("write")]; ok && m != writeNaive {
		c.mode, c.raw = m, conn.NetConn()
		// the library's own pong would land inside a hand-framed batch:
		// answer pings through the writer's lock instead
		conn.SetPingHandler(func(data string) error {
			p := []byte(data)
			if len(p) > 125 {
				p = p[:125]
			}
			return c.writeRaw(append(wsframe.AppendHeader(nil, websocket.PongMessage, len(p)), p...), time.Second)
		})
	}
	var joined []string
	written, said := make(chan struct{}), make(chan struct{})
	if conn.Query("ingress") == "pipe" && h.rdb != nil {
		c.says = make(chan hubSay, hubSayQueue)
		go h.sayWorker(ctx, c, said)
	} else {
		close(said)
	}
	defer func() {
		c.close()
		<-written // the handler's return recycles conn: the writer must be done with it
		<-said
		h.mu.Lock()
		for _, r := range joined {
			delete(h.rooms[r], c)
		}
		h.mu.Unlock()
	}()
	go h.write(c, written)
	c.enqueue(mustEncode(protocol.Hello{User: c.user, Node: h.node}))
	for {
		_, p, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var in struct {
			Type, Lobby, Room, Text, Ref string
		}
		if err := json.Unmarshal(p, &in); err != nil {
			c.enqueue(mustEncode(protocol.ErrorEvent{Code: errcode.BadJSON, Message: err.Error()}))
			continue
		}
		switch in.Type {
		case "join":
			room, err := h.join(ctx, c, in.Lobby)
			if err != nil {
				c.enqueue(mustEncode(protocol.ErrorEvent{Code: errcode.Internal, Message: err.Error()}))
				continue
			}
			joined = append(joined, room.ID)
			c.enqueue(mustEncode(protocol.Joined{Room: room}))
		case "say":
			id := fmt.Sprintf("%013d-%s-%d", time.Now().UnixMilli(), h.node, h.seq.Add(1))
			frame := mustEncode(protocol.MessageEvent{Message: Message{ID: id, Room: in.Room, From: c.user, Text: in.Text, TS: time.Now()}})
			if c.says != nil {
				if !c.queueSay(hubSay{room: in.Room, ref: in.Ref, id: id, frame: frame}) {
					return
				}
				continue
			}
			if h.rdb != nil {
				if err := h.rdb.Publish(ctx, "hub:"+in.Room, frame).Err(); err != nil {
					c.enqueue(mustEncode(protocol.ErrorEvent{Code: errcode.RedisUnavailable, Message: err.Error(), Ref: in.Ref}))
					continue
				}
			} else {
				h.broadcast(in.Room, frame)
			}
			if in.Ref != "" {
				c.enqueue(mustEncode(protocol.Ack{Ref: in.Ref, ID: id}))
			}
		case "ping":
			c.enqueue([]byte(`{"type":"pong"}`))
		}
	}
}

// write is the connection's only writer. When the client is dropped (its
// queue overflowed) it sends close 1013, as chatd does, and wakes the
// reader so that the handler returns: closing the conn from here would do
// nothing, fasthttp closes a hijacked connection only when the handler
// returns, and a dropped client would go on silently receiving nothing.
func (h *hub) write(c *hubClient, finished chan<- struct{}) {
	defer close(finished)
	if c.mode != writeNaive {
		c.writeCoalesced()
		return
	}
	for {
		select {
		case p := <-c.send:
			_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := c.conn.WriteMessage(websocket.TextMessage, p); err != nil {
				c.close()
				_ = c.conn.SetReadDeadline(time.Now())
				return
			}
		case <-c.done:
			_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(1013, "send queue full"), time.Now().Add(time.Second))
			_ = c.conn.SetReadDeadline(time.Now())
			return
		}
	}
}

// writeCoalesced is the writer of the coalescing modes: on each wake-up it
// takes everything queued, frames it by hand into one buffer (one frame
// per event, or newline-joined events per frame in batch mode) and writes
// it with one system call and one deadline, as chatd's wsConn does.
func (c *hubClient) writeCoalesced() {
	var events [][]byte
	var buf []byte
	for {
		select {
		case p := <-c.send:
			events = append(events[:0], p)
		case <-c.done:
			_ = c.writeRaw(wsframe.AppendClose(nil, 1013, "send queue full"), time.Second)
			c.wake()
			return
		}
	drain:
		for {
			select {
			case p := <-c.send:
				events = append(events, p)
			default:
				break drain
			}
		}
		buf = wsframe.AppendEvents(buf[:0], events, c.mode == writeBatch)
		if err := c.writeRaw(buf, 10*time.Second); err != nil {
			c.close()
			c.wake()
			return
		}
		clear(events) // let the payloads go
	}
}

// writeRaw writes b onto the raw connection under the writer's lock.
func (c *hubClient) writeRaw(b []byte, wait time.Duration) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.raw.SetWriteDeadline(time.Now().Add(wait)); err != nil {
		return err
	}
	_, err := c.raw.Write(b)
	return err
}

// join gives c a seat: the n-th seat of a lobby is in room ceil(n/cap)
// (cap: the connection's ?cap=, 50 by default, like chatd's room.capacity).
func (h *hub) join(ctx context.Context, c *hubClient, lobby string) (Room, error) {
	var n int
	if h.rdb != nil {
		v, err := h.rdb.Incr(ctx, "hub:"+lobby+":seats").Result()
		if err != nil {
			return Room{}, err
		}
		n = int(v)
	} else {
		h.mu.Lock()
		h.seats[lobby]++
		n = h.seats[lobby]
		h.mu.Unlock()
	}
	seq := (n-1)/c.cap + 1
	room := Room{ID: lobby + "-" + strconv.Itoa(seq), Lobby: lobby, Seq: seq, Capacity: c.cap, Members: []string{c.user}}
	h.mu.Lock()
	m := h.rooms[room.ID]
	if m == nil {
		m = map[*hubClient]struct{}{}
		h.rooms[room.ID] = m
	}
	m[c] = struct{}{}
	var wait chan struct{}
	if h.ps != nil {
		if w, ok := h.subs[room.ID]; ok {
			wait = w
		} else {
			wait = make(chan struct{})
			h.subs[room.ID] = wait
			if err := h.ps.Subscribe(ctx, "hub:"+room.ID); err != nil {
				h.mu.Unlock()
				return Room{}, err
			}
		}
	}
	h.mu.Unlock()
	if wait != nil {
		select {
		case <-wait: // Redis confirmed the SUBSCRIBE
		case <-time.After(5 * time.Second):
			return Room{}, errors.New("subscribe not confirmed")
		}
	}
	return room, nil
}

func (h *hub) broadcast(room string, p []byte) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for c := range h.rooms[room] {
		c.enqueue(p)
	}
}

// receive is the hub's one pub/sub reader.
func (h *hub) receive(ctx context.Context) {
	for ctx.Err() == nil {
		v, err := h.ps.Receive(ctx)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		switch m := v.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				h.mu.Lock()
				if w, ok := h.subs[strings.TrimPrefix(m.Channel, "hub:")]; ok {
					select {
					case <-w:
					default:
						close(w)
					}
				}
				h.mu.Unlock()
			}
		case *redis.Message:
			h.broadcast(strings.TrimPrefix(m.Channel, "hub:"), []byte(m.Payload))
		}
	}
}

// mustEncode encodes an event of the bare hub, which holds strings only.
func mustEncode(ev protocol.ServerEvent) []byte {
	b, err := protocol.Encode(ev)
	if err != nil {
		panic(err)
	}
	return b
}
