package client

import (
	"fmt"
	"time"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/protocol"
)

// handle applies the events of one frame, then queues the application's
// events (outside the lock: the queue may make the reader wait).
func (cn *Conn) handle(s *socket, ds []decoded) {
	if len(ds) == 0 {
		return
	}
	var out []Event
	cn.mu.Lock()
	for _, d := range ds {
		if d.err != nil {
			cn.stats.BadEvents++
			cn.cl.log.Warn("chatd websocket: undecodable event skipped", "err", d.err, "event", clipLine(d.line))
			out = append(out, BadFrameEvent{Err: d.err, Frame: clipLine(d.line)})
			continue
		}
		out = cn.apply(s, d.ev, out)
	}
	cn.mu.Unlock()
	cn.q.push(out...)
}

// apply acts on one event and appends the application's events to out.
// Under cn.mu.
func (cn *Conn) apply(s *socket, ev protocol.ServerEvent, out []Event) []Event {
	switch ev := ev.(type) {
	case protocol.Joined:
		return cn.joined(s, ev.Room, out)
	case protocol.MessageEvent:
		if st := cn.rooms[ev.Message.Room]; st != nil {
			if st.lastID != "" && compareIDs(ev.Message.ID, st.lastID) <= 0 {
				cn.stats.Duplicates++
				return out // had it: the seam of a resume
			}
			st.lastID = ev.Message.ID
		}
		return append(out, MessageEvent{Message: ev.Message})
	case protocol.Ack:
		if o := cn.byRef[ev.Ref]; o != nil && o.kind == opSay {
			cn.resolveLocked(o, opResult{id: ev.ID})
		}
	case protocol.Pong:
		cn.pong(s)
	case protocol.RPCResult:
		if o := cn.byRef[ev.Ref]; o != nil && o.kind == opRPC {
			cn.resolveLocked(o, opResult{data: ev.Data})
		}
	case protocol.Matched:
		return append(out, MatchedEvent{Queue: ev.Queue, Ticket: ev.Ticket, Match: ev.Match, Room: ev.Room, Players: ev.Players,
			ReserveSeconds: ev.ReserveSeconds, TS: ev.TS, Data: ev.Data})
	case protocol.DM, protocol.DMSent, protocol.DMTypingEvent, protocol.DMReadEvent, protocol.DMRemoved, protocol.DMGap:
		return cn.directEvent(s, ev, out)
	case protocol.ErrorEvent:
		return cn.errorEvent(s, ev, out)
	case protocol.Presence:
		return append(out, PresenceEvent{Room: ev.Room, User: ev.User, State: ev.State})
	case protocol.TypingEvent:
		return append(out, TypingEvent{Room: ev.Room, User: ev.User})
	case protocol.Settings:
		return append(out, SettingsEvent{Key: ev.Key, Value: ev.Value, Version: ev.Version})
	case protocol.Notice:
		return append(out, NoticeEvent{ID: ev.ID, Text: ev.Text})
	case protocol.MessageRemoved:
		return append(out, MessageRemovedEvent{Room: ev.Room, ID: ev.ID})
	case protocol.Left:
		delete(cn.rooms, ev.Room)
		return append(out, LeftEvent{Room: ev.Room})
	}
	// hello again, or a type added to the protocol later: nothing to do
	return out
}

// joined answers the oldest join or resume waiting on s (frames take
// effect in the order sent, and each answers joined or an error with its
// ref) and follows the room.
func (cn *Conn) joined(s *socket, room Room, out []Event) []Event {
	var o *op
	for i, w := range s.joinq {
		if (w.kind == opJoin && w.lobby == room.Lobby) || (w.kind == opResume && w.room == room.ID) {
			o = w
			s.joinq = append(s.joinq[:i:i], s.joinq[i+1:]...)
			break
		}
	}
	after, resumed := "", false
	if o != nil {
		s.joinedRefs[o.ref] = room.ID
		if o.kind == opResume {
			after, resumed = o.after, true
		}
		cn.resolveLocked(o, opResult{room: room})
	}
	if st := cn.rooms[room.ID]; st != nil {
		st.room = room
	} else {
		cn.rooms[room.ID] = &roomState{room: room, lastID: after}
	}
	return append(out, JoinedEvent{Room: room, Resumed: resumed})
}

// pong answers the oldest call waiting for a pong on s.
func (cn *Conn) pong(s *socket) {
	if len(s.pingq) == 0 {
		return // a ping of somebody else's
	}
	o := s.pingq[0]
	s.pingq = s.pingq[1:]
	if o.kind == opLeave && !o.failed {
		delete(cn.rooms, o.room)
	}
	cn.resolveLocked(o, opResult{rtt: time.Since(o.sentAt)})
}

// errorEvent matches an error event to the call it answers, or hands it
// to the application.
func (cn *Conn) errorEvent(s *socket, ev protocol.ErrorEvent, out []Event) []Event {
	kind := refKind(ev.Ref, cn.refPrefix)
	e := errFor(ev, kind)
	if o := cn.byRef[ev.Ref]; o != nil && ev.Ref != "" {
		o.failed = true
		for i, w := range s.joinq {
			if w == o {
				s.joinq = append(s.joinq[:i:i], s.joinq[i+1:]...)
				break
			}
		}
		cn.resolveLocked(o, opResult{err: e})
		if !o.internal {
			return out
		}
		// a resume of ours after a reconnect
		if isTransient(e) {
			s.force(fmt.Errorf("client: resume %s: %w", o.room, e))
			return out
		}
		delete(cn.rooms, o.room)
		return append(out, RoomLostEvent{Room: o.room, Err: e})
	}
	if room, ok := s.joinedRefs[ev.Ref]; ok && ev.Ref != "" {
		// A join or resume said joined and then failed to replay: the
		// server dropped the room from this connection. Connect again:
		// the resume of every room mends it, or says the room is lost.
		s.force(fmt.Errorf("client: room %s: %w", room, e))
		return out
	}
	switch {
	case ev.Ref == "" && ev.Code == errcode.ResumeGap && ev.Room != "":
		after := ""
		if st := cn.rooms[ev.Room]; st != nil {
			after = st.lastID
		}
		return append(out, ResumeGapEvent{Room: ev.Room, After: after})
	case ev.Ref == "" && ev.Code == errcode.NotSeated && cn.rooms[ev.Room] != nil:
		// the seat lapsed and was taken: the server no longer sends the room
		delete(cn.rooms, ev.Room)
		return append(out, RoomLostEvent{Room: ev.Room, Err: e})
	}
	return append(out, ErrorEvent{Err: e})
}

// refKind is the kind of call a ref of this Conn names, or 0.
func refKind(ref, prefix string) opKind {
	if len(ref) > len(prefix)+1 && ref[:len(prefix)] == prefix && ref[len(prefix)] == '.' {
		return opKind(ref[len(prefix)+1])
	}
	return 0
}
