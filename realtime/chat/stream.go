package chat

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
)

// A stream is a realtime client that sends nothing: a Server-Sent Events
// connection (package web), for networks that break WebSocket upgrades.
// Its session joins and leaves rooms, says, types and marks read over
// plain HTTP on any node (REST), so no request needs to reach the node
// holding the stream: no sticky sessions. The stream follows its
// session's rooms — the rooms of the session's poll cursors — with an
// attachment of its own in each, as a WebSocket does: its seats are kept
// while it is open and released by their lease when it is gone. A REST
// join or leave anywhere tells the stream's node over the session's
// channel, and the stream enters or leaves the room.
//
// Position: a stream's position is one value for every room it sits in
// (Position, the SSE id), so a reconnect with it resumes every room with
// no gap and no duplicate.

// sessionChannel is the pub/sub channel of a session's events: a REST join
// or leave published by whichever node took it, for the node that holds
// the session's stream.
func sessionChannel(prefix, session string) string {
	return keyspace.New(prefix).Key("session", session, "events") // CHANNEL
}

// Position is where a stream is in each of its rooms: room → the id of the
// last message delivered. Its text form (String, ParsePosition) is the SSE
// event id: "room@id,room@id,…", rooms sorted.
type Position map[string]string

// Limits of a position.
const (
	maxPositionRooms = 64
	maxPositionLen   = 8 << 10
)

// String is the position's text form.
func (p Position) String() string {
	keys := make([]string, 0, len(p))
	for r := range p {
		keys = append(keys, r)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, r := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r)
		b.WriteByte('@')
		b.WriteString(p[r])
	}
	return b.String()
}

// ErrBadPosition is returned by ParsePosition for a malformed position.
var ErrBadPosition = errors.New("realtime: malformed stream position")

// ParsePosition parses a position's text form; "" is the empty position.
func ParsePosition(s string) (Position, error) {
	p := Position{}
	if s == "" {
		return p, nil
	}
	if len(s) > maxPositionLen {
		return nil, fmt.Errorf("%w: longer than %d bytes", ErrBadPosition, maxPositionLen)
	}
	for _, part := range strings.Split(s, ",") {
		room, id, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("%w: %q is not room@id", ErrBadPosition, realtime.ClipRunes(part, 80))
		}
		if _, _, err := rooms.ParseRoom(room); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPosition, err)
		}
		nid, err := rooms.NormalizeID(id)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadPosition, err)
		}
		p[room] = nid
		if len(p) > maxPositionRooms {
			return nil, fmt.Errorf("%w: more than %d rooms", ErrBadPosition, maxPositionRooms)
		}
	}
	return p, nil
}

// Stream opens a stream of p's session writing through t (lease as for
// Connect), positioned at after (from the client's Last-Event-ID; empty
// for a new stream): it enters every room of the session, each from its
// position (a room without one replays its latest messages, as a join
// does), and follows the session's joins and leaves until it closes.
func (rt *REST) Stream(ctx context.Context, p realtime.Principal, lease string, t realtime.Transport, after Position) (*realtime.Client, error) {
	ch := rt.ch
	c, err := ch.connect(p, lease, t)
	if err != nil {
		return nil, err
	}
	mu := new(sync.Mutex) // one sync at a time per stream
	sub, err := ch.core.Follow(ctx, sessionChannel(ch.prefix, p.Session), bus.HandlerFuncs{
		OnReceive:      func(string, []byte) { ch.run(func(ctx context.Context) { rt.syncStream(ctx, c, mu, nil) }) },
		OnResubscribed: func() { ch.run(func(ctx context.Context) { rt.syncStream(ctx, c, mu, nil) }) },
	})
	if err != nil {
		c.Close(realtime.CloseServiceReboot, "could not follow the session: reconnect")
		return c, err
	}
	c.OnClose(func() { _ = sub.Close(context.Background()) })
	rt.syncStream(ctx, c, mu, after)
	return c, nil
}

// syncStream makes the stream's rooms the session's: it enters the rooms
// the session joined (from after's position where it has one) and leaves
// the ones it left.
func (rt *REST) syncStream(ctx context.Context, c *realtime.Client, mu *sync.Mutex, after Position) {
	ch := rt.ch
	mu.Lock()
	defer mu.Unlock()
	if c.Closing() {
		return
	}
	p := c.Principal()
	cur, err := ch.cursors.Cursors(ctx, p.Session)
	if err != nil {
		ch.log.Debug("stream rooms", "session", p.Session, "err", err)
		return
	}
	for _, room := range c.Rooms() {
		if _, ok := cur[room]; !ok {
			ch.hub.Leave(room, c)
			ch.detach(ctx, room, c)
			c.SendEvent(protocol.Left{Room: room})
		}
	}
	for room := range cur {
		if c.InRoom(room) {
			continue
		}
		r, err := ch.claimRoom(ctx, room, p.User, ch.wsAttach(c))
		if err != nil {
			c.Refuse(err, room, "")
			continue
		}
		if err := ch.enter(ctx, c, r, after[room], streamFloor(after, room, cur[room])); err != nil && !c.Closing() {
			c.Refuse(err, room, "")
		}
	}
}

// streamFloor is where a stream entering room is owed every message
// after: the session's join point (its cursor, set by the REST join to the
// room's newest message then; "0" for an empty room), for a room the
// stream enters while open (the session joined it, maybe on another node,
// before this node heard of it) or that a reopen's position does not name
// (the stream had delivered none of it). Without it the stream entered as
// a join from where it went live, and what passed between the session's
// join and that moment, past the latest JoinHistory, was skipped without a
// word. A new stream (no position) enters its rooms as joins: "".
func streamFloor(after Position, room, cursor string) string {
	if after != nil && (len(after) == 0 || after[room] != "") {
		return ""
	}
	if cursor == "0" {
		return realtime.StreamStart
	}
	if _, err := rooms.NormalizeID(cursor); err != nil {
		return ""
	}
	return cursor
}

// sessionChanged tells the node holding p's stream, if any, that the
// session joined or left a room.
func (rt *REST) sessionChanged(ctx context.Context, p realtime.Principal) {
	ch := rt.ch
	if err := ch.core.Publish(ctx, sessionChannel(ch.prefix, p.Session), "rooms"); err != nil {
		ch.log.Debug("publish session change", "session", p.Session, "err", err)
	}
}
