package realtime

import (
	"context"
	"log/slog"
	"time"

	"github.com/chatd/chatd/notices"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/seen"
)

// noticeStore is what notice delivery needs of the notice board.
type noticeStore interface {
	Post(ctx context.Context, text string) (notices.Notice, error)
	Recent(ctx context.Context, limit int) ([]notices.Notice, error)
	Channel() string
}

// seenFilter is what notice delivery needs of the seen filters.
type seenFilter interface {
	MarkFor(ctx context.Context, user string, items []string, ttl time.Duration) error
	Unseen(ctx context.Context, user string, items []string) ([]string, error)
}

var (
	_ noticeStore = (*notices.Board)(nil)
	_ seenFilter  = (*seen.Filter)(nil)
)

// Notices delivers notices once per user: to every open connection as
// they are posted (over the bus, on every node), to a new connection the
// recent ones its user has not seen, and to a REST session in its poll.
// Each delivery marks the notice seen in the user's bloom filter first.
type Notices struct {
	store noticeStore
	seen  seenFilter
	hub   *Hub
	run   func(fn func(ctx context.Context)) bool
	log   *slog.Logger
}

// receive delivers a new notice to this node's clients and marks it seen
// for their users (on the bus goroutine: the marking runs on its own).
func (nb *Notices) receive(_ string, p []byte) {
	ev, err := notices.DecodeEvent(p)
	if err != nil {
		return
	}
	frame, err := protocol.Encode(protocol.Notice{ID: ev.ID, Text: ev.Text})
	if err != nil {
		return
	}
	users := map[string]time.Duration{} // user → the life of its filter
	for _, c := range nb.hub.Clients() {
		c.Send(frame)
		if life, ok := users[c.p.User]; !ok || life != 0 {
			users[c.p.User] = c.p.Life()
		}
	}
	nb.run(func(ctx context.Context) {
		for u, life := range users {
			if err := nb.seen.MarkFor(ctx, u, []string{ev.ID}, life); err != nil {
				nb.log.Debug("mark notice seen", "user", u, "err", err)
			}
		}
	})
}

// DeliverUnseen sends a new client the recent notices its user has not
// seen, then marks them seen.
func (nb *Notices) DeliverUnseen(ctx context.Context, c *Client) {
	ids, byID, err := nb.unseen(ctx, c.p.User)
	if err != nil || len(ids) == 0 {
		return
	}
	// Mark first, then send: a notice is shown once (at most), even when the
	// user's next connection opens before this one has finished.
	if err := nb.seen.MarkFor(ctx, c.p.User, ids, c.p.Life()); err != nil {
		nb.log.Debug("mark notices seen", "user", c.p.User, "err", err)
		return
	}
	for _, id := range ids {
		c.SendEvent(protocol.Notice{ID: id, Text: byID[id].Text})
	}
}

// PollNotice is a notice in the poll's notices section.
type PollNotice struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// TakeUnseen returns the poll's notices section for user and marks them
// seen.
func (nb *Notices) TakeUnseen(ctx context.Context, p Principal) ([]PollNotice, error) {
	user := p.User
	ids, byID, err := nb.unseen(ctx, user)
	if err != nil {
		return nil, err
	}
	list := make([]PollNotice, 0, len(ids))
	for _, id := range ids {
		list = append(list, PollNotice{ID: id, Text: byID[id].Text})
	}
	if len(ids) > 0 {
		if err := nb.seen.MarkFor(ctx, user, ids, p.Life()); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// unseen returns the ids of the recent notices user has not seen, oldest
// first.
func (nb *Notices) unseen(ctx context.Context, user string) ([]string, map[string]notices.Notice, error) {
	recent, err := nb.store.Recent(ctx, 0)
	if err != nil || len(recent) == 0 {
		return nil, nil, err
	}
	ids := make([]string, len(recent))
	byID := make(map[string]notices.Notice, len(recent))
	for i, nt := range recent {
		ids[i] = nt.ID
		byID[nt.ID] = nt
	}
	unseen, err := nb.seen.Unseen(ctx, user, ids)
	return unseen, byID, err
}
