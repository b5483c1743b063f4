package realtime

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/rooms"
)

// PollResult is the answer to a poll: the sections dirty since the
// session's last poll, each with its fresh data.
type PollResult struct {
	Dirty []string       `json:"dirty"`
	Data  map[string]any `json:"data"`
}

// Poll answers a REST session's poll. Clean, it costs one Redis command
// (GETDEL of the session's mask); with wait > 0 it parks until a mark wakes
// it, at most wait (capped at dirty.MaxWait); a draining node answers at
// once. It also renews the session's seats and presence, at most once per
// third of the lease.
func (n *Node) Poll(ctx context.Context, user, session string, wait time.Duration) (PollResult, error) {
	wait = min(wait, dirty.MaxWait)
	if _, err := n.dirty.Open(ctx, session, user); err != nil {
		return PollResult{}, err
	}
	if n.renewed.due(session, n.cfg.Now(), n.lease()/3) {
		n.renewREST(ctx, user, session)
	}
	var mask dirty.Mask
	var err error
	if wait > 0 {
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-n.draining:
				cancel()
			case <-wctx.Done():
			}
		}()
		mask, err = n.dirty.Wait(wctx, session, wait)
		cancel()
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			mask, err = n.dirty.Take(ctx, session)
		}
	} else {
		mask, err = n.dirty.Take(ctx, session)
	}
	if err != nil {
		return PollResult{}, err
	}
	res := PollResult{Dirty: mask.Sections(), Data: map[string]any{}}
	if res.Dirty == nil {
		res.Dirty = []string{}
	}
	if mask != 0 {
		if err := n.pollData(ctx, user, session, mask, res.Data); err != nil {
			// put the bits back so the next poll retries them
			_ = n.dirty.MarkSessions(context.WithoutCancel(ctx), []string{session}, mask)
			return PollResult{}, err
		}
	}
	return res, nil
}

// pollData fills data with the fresh state of each dirty section.
func (n *Node) pollData(ctx context.Context, user, session string, mask dirty.Mask, data map[string]any) error {
	var cur map[string]string
	if mask.Has(dirty.Rooms) || mask.Has(dirty.Messages) {
		var err error
		if cur, err = n.dirty.Cursors(ctx, session); err != nil {
			return err
		}
	}
	if mask.Has(dirty.Rooms) {
		ids := make([]string, 0, len(cur))
		for room := range cur {
			ids = append(ids, room)
		}
		sort.Strings(ids)
		list, err := n.rooms.RoomMany(ctx, ids) // one round trip for all
		if err != nil {
			return err
		}
		if list == nil {
			list = []rooms.Room{}
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
			msgs, err := n.rooms.History(ctx, room, after, rooms.MaxHistoryLimit)
			if errors.Is(err, rooms.ErrResumeGap) {
				// trimmed past the cursor, or Redis lost the stream: send
				// what there is
				msgs, err = n.rooms.History(ctx, room, "", rooms.MaxHistoryLimit)
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
			if err := n.dirty.SetCursor(ctx, session, next); err != nil {
				return err
			}
		}
		data["messages"] = out
	}
	if mask.Has(dirty.Settings) {
		// The mark may come from the node that took the write before this
		// node's copy heard of it over pub/sub: read the snapshot, so the
		// bit is never spent on a stale answer.
		if err := n.settings.Reload(ctx); err != nil {
			return err
		}
		v, vals := n.settings.Values()
		data["settings"] = map[string]any{"version": v, "values": vals}
	}
	if mask.Has(dirty.Wallet) {
		w, err := n.shop.Wallet(ctx, user)
		if err != nil {
			return err
		}
		data["wallet"] = w
	}
	if mask.Has(dirty.Leaderboards) {
		topics, err := n.dirty.Following(ctx, user)
		if err != nil {
			return err
		}
		var boards []string
		for _, t := range topics {
			if board, ok := isBoardTopic(t); ok {
				boards = append(boards, board)
			}
		}
		entries := map[string]ranking.Entry{}
		for len(boards) > 0 { // one pipeline per MaxBatch boards
			k := min(len(boards), ranking.MaxBatch)
			got, err := n.ranking.GetMany(ctx, boards[:k], user)
			if err != nil {
				return err
			}
			for b, e := range got {
				entries[b] = e
			}
			boards = boards[k:]
		}
		data["leaderboards"] = entries
	}
	if mask.Has(dirty.Notices) {
		ids, byID, err := n.unseenNotices(ctx, user)
		if err != nil {
			return err
		}
		list := make([]map[string]string, 0, len(ids))
		for _, id := range ids {
			list = append(list, map[string]string{"id": id, "text": byID[id].Text})
		}
		if len(ids) > 0 {
			if err := n.seen.Mark(ctx, user, ids); err != nil {
				return err
			}
		}
		data["notices"] = list
	}
	return nil
}
