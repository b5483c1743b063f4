package web

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/rooms"
)

func contextTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// restEnter records that a REST session is in room: the room joins the
// session's poll cursor, starting after the room's newest message, so the
// next poll of "messages" returns what is sent from now on.
func (s *Server) restEnter(ctx context.Context, sess session, room string) {
	if _, err := s.dirty.Open(ctx, sess.ID, sess.User); err != nil {
		s.log.Debug("open session", "err", err)
		return
	}
	last := "0"
	if msgs, err := s.rooms.History(ctx, room, "", 1); err == nil && len(msgs) == 1 {
		last = msgs[0].ID
	}
	cur, err := s.dirty.Cursor(ctx, sess.ID, []string{room})
	if err == nil && cur[room] != "" {
		return // already in the room: keep its place
	}
	if err := s.dirty.SetCursor(ctx, sess.ID, map[string]string{room: last}); err != nil {
		s.log.Debug("set cursor", "err", err)
	}
	// the next poll renews now, so presence shows the new room
	s.pollRenewals.forget(sess.ID)
}

// renewals throttles the seat and presence renewals polls trigger: a
// session's seats are renewed by this node at most once per third of the
// lease, so a clean poll stays one Redis command. It keeps when each session
// was last renewed, not when the next renewal is due, so that a shorter
// lease (seat.lease_seconds lowered) applies to the very next poll.
type renewals struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (r *renewals) forget(sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, sid)
}

func (r *renewals) due(sid string, now time.Time, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if last, ok := r.last[sid]; ok && !now.Before(last) && now.Sub(last) < every {
		return false
	}
	if len(r.last) > 100_000 {
		// an entry at least `every` old is due anyway: dropping it changes nothing
		for k, t := range r.last {
			if now.Sub(t) >= every {
				delete(r.last, k)
			}
		}
	}
	r.last[sid] = now
	return true
}

// poll answers GET /poll: the sections dirty since the session's last poll,
// each with its fresh data. Clean, it costs one Redis command (GETDEL of
// the session's mask); with wait it parks until a mark wakes it.
func (s *Server) poll(c *fiber.Ctx) error {
	wait, err := intQuery(c, "wait", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	if wait > int(dirty.MaxWait/time.Second) {
		wait = int(dirty.MaxWait / time.Second)
	}
	ctx := c.UserContext()
	sess := sessionOf(c)
	if _, err := s.dirty.Open(ctx, sess.ID, sess.User); err != nil {
		return err
	}
	if s.pollRenewals.due(sess.ID, s.cfg.Now(), s.lease()/3) {
		s.renewREST(ctx, sess)
	}
	var mask dirty.Mask
	if wait > 0 {
		// a draining node answers its long polls at once
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-s.draining:
				cancel()
			case <-wctx.Done():
			}
		}()
		mask, err = s.dirty.Wait(wctx, sess.ID, time.Duration(wait)*time.Second)
		cancel()
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			mask, err = s.dirty.Take(ctx, sess.ID)
		}
	} else {
		mask, err = s.dirty.Take(ctx, sess.ID)
	}
	if err != nil {
		return err
	}
	sections := mask.Sections()
	if sections == nil {
		sections = []string{}
	}
	data := fiber.Map{}
	if mask != 0 {
		if err := s.pollData(ctx, sess, mask, data); err != nil {
			// put the bits back so the next poll retries them
			_ = s.dirty.MarkSessions(context.WithoutCancel(ctx), []string{sess.ID}, mask)
			return err
		}
	}
	return c.JSON(fiber.Map{"dirty": sections, "data": data})
}

// renewREST renews the seats of a polling session's rooms and its user's
// presence (a REST user in no room is online too). A seat that lapsed (the
// session did not poll within the lease) is dropped from the session's rooms
// and its rooms bit set, so this very poll tells the client to join again.
func (s *Server) renewREST(ctx context.Context, sess session) {
	cur, err := s.dirty.Cursors(ctx, sess.ID)
	if err != nil {
		s.log.Debug("read REST rooms", "err", err)
		return
	}
	seats := make([]rooms.Seat, 0, len(cur))
	for room := range cur {
		seats = append(seats, rooms.Seat{Room: room, User: sess.User})
	}
	held := make([]string, 0, len(cur))
	if len(seats) > 0 {
		lost, err := s.rooms.Renew(ctx, seats)
		if err != nil {
			s.log.Debug("renew REST seats", "err", err)
			lost = nil
		}
		gone := map[string]bool{}
		for _, st := range lost {
			gone[st.Room] = true
			if err := s.dirty.DropCursor(ctx, sess.ID, st.Room); err != nil {
				s.log.Debug("drop lapsed REST room", "err", err)
			}
		}
		if len(gone) > 0 {
			if err := s.dirty.MarkSessions(ctx, []string{sess.ID}, dirty.Of(dirty.Rooms)); err != nil {
				s.log.Debug("mark lapsed REST room", "err", err)
			}
		}
		for _, st := range seats {
			if !gone[st.Room] {
				held = append(held, st.Room)
			}
		}
	}
	if err := s.presence.Touch(ctx, s.cfg.Node, []presence.UserState{{User: sess.User, Rooms: held}}); err != nil {
		s.log.Debug("touch REST presence", "err", err)
	}
}

// pollData fills data with the fresh state of each dirty section.
func (s *Server) pollData(ctx context.Context, sess session, mask dirty.Mask, data fiber.Map) error {
	var cur map[string]string
	if mask.Has(dirty.Rooms) || mask.Has(dirty.Messages) {
		var err error
		if cur, err = s.dirty.Cursors(ctx, sess.ID); err != nil {
			return err
		}
	}
	if mask.Has(dirty.Rooms) {
		list := []rooms.Room{}
		for room := range cur {
			r, err := s.rooms.Room(ctx, room)
			if errors.Is(err, rooms.ErrUnknownRoom) {
				continue
			}
			if err != nil {
				return err
			}
			list = append(list, r)
		}
		data["rooms"] = list
	}
	if mask.Has(dirty.Messages) {
		out := map[string][]rooms.Message{}
		next := map[string]string{}
		for room, after := range cur {
			// "0": the room had no message when the session entered, so
			// everything in it now is new to the session.
			if after == "0" {
				after = ""
			}
			msgs, err := s.rooms.History(ctx, room, after, rooms.MaxHistoryLimit)
			if errors.Is(err, rooms.ErrResumeGap) {
				// trimmed past the cursor, or Redis lost the stream: send
				// what there is
				msgs, err = s.rooms.History(ctx, room, "", rooms.MaxHistoryLimit)
			}
			if errors.Is(err, rooms.ErrUnknownRoom) {
				continue
			}
			if err != nil {
				return err
			}
			if len(msgs) > 0 {
				out[room] = msgs
				next[room] = msgs[len(msgs)-1].ID
			}
		}
		if len(next) > 0 {
			if err := s.dirty.SetCursor(ctx, sess.ID, next); err != nil {
				return err
			}
		}
		data["messages"] = out
	}
	if mask.Has(dirty.Settings) {
		// The mark may come from the node that took the write before this
		// node's copy heard of it over pub/sub: read the snapshot, so the
		// bit is never spent on a stale answer.
		if err := s.settings.Reload(ctx); err != nil {
			return err
		}
		v, vals := s.settings.Values()
		data["settings"] = fiber.Map{"version": v, "values": vals}
	}
	if mask.Has(dirty.Wallet) {
		w, err := s.shop.Wallet(ctx, sess.User)
		if err != nil {
			return err
		}
		data["wallet"] = w
	}
	if mask.Has(dirty.Leaderboards) {
		topics, err := s.dirty.Following(ctx, sess.User)
		if err != nil {
			return err
		}
		boards := map[string]ranking.Entry{}
		for _, t := range topics {
			board, ok := strings.CutPrefix(t, "lb:")
			if !ok {
				continue
			}
			e, err := s.ranking.Get(ctx, board, sess.User)
			if errors.Is(err, ranking.ErrUnknownPlayer) {
				continue
			}
			if err != nil {
				return err
			}
			boards[board] = e
		}
		data["leaderboards"] = boards
	}
	if mask.Has(dirty.Notices) {
		ids, byID, err := s.unseenNotices(ctx, sess.User)
		if err != nil {
			return err
		}
		list := make([]fiber.Map, 0, len(ids))
		for _, id := range ids {
			list = append(list, fiber.Map{"id": id, "text": byID[id].Text})
		}
		if len(ids) > 0 {
			if err := s.seen.Mark(ctx, sess.User, ids); err != nil {
				return err
			}
		}
		data["notices"] = list
	}
	return nil
}
