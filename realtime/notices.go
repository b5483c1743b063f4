package realtime

import (
	"context"
	"unicode/utf8"

	"github.com/chatd/chatd/moderation"
	"github.com/chatd/chatd/notices"
)

// onNotice delivers a new notice to this node's clients and marks it seen
// for their users (on the bus goroutine: the marking runs on its own).
func (n *Node) onNotice(_ string, p []byte) {
	ev, err := notices.DecodeEvent(p)
	if err != nil {
		return
	}
	frame := mustJSON(map[string]string{"type": "notice", "id": ev.ID, "text": ev.Text})
	users := map[string]struct{}{}
	for _, c := range n.hub.Clients() {
		c.Send(frame)
		users[c.user] = struct{}{}
	}
	n.goRun(func(ctx context.Context) {
		for u := range users {
			if err := n.seen.Mark(ctx, u, []string{ev.ID}); err != nil {
				n.log.Debug("mark notice seen", "user", u, "err", err)
			}
		}
	})
}

// deliverUnseenNotices sends a new client the recent notices its user has
// not seen (by the user's seen filter), then marks them seen.
func (n *Node) deliverUnseenNotices(ctx context.Context, c *Client) {
	ids, byID, err := n.unseenNotices(ctx, c.user)
	if err != nil || len(ids) == 0 {
		return
	}
	// Mark first, then send: a notice is shown once (at most), even when the
	// user's next connection opens before this one has finished.
	if err := n.seen.Mark(ctx, c.user, ids); err != nil {
		n.log.Debug("mark notices seen", "user", c.user, "err", err)
		return
	}
	for _, id := range ids {
		c.SendJSON(map[string]string{"type": "notice", "id": id, "text": byID[id].Text})
	}
}

// unseenNotices returns the ids of the recent notices user has not seen,
// oldest first.
func (n *Node) unseenNotices(ctx context.Context, user string) ([]string, map[string]notices.Notice, error) {
	recent, err := n.notices.Recent(ctx, 0)
	if err != nil || len(recent) == 0 {
		return nil, nil, err
	}
	ids := make([]string, len(recent))
	byID := make(map[string]notices.Notice, len(recent))
	for i, nt := range recent {
		ids[i] = nt.ID
		byID[nt.ID] = nt
	}
	unseen, err := n.seen.Unseen(ctx, user, ids)
	return unseen, byID, err
}

// Close codes of moderation (docs/PROTOCOL.md).
const (
	CloseKicked = 4001
	CloseBanned = 4003
	// CloseSessionEnded closes a client whose guest session ended (signed
	// out, or its name lapsed and was claimed by someone else).
	CloseSessionEnded = 4000
)

// onModeration acts on a moderation event from any node: a kick or a ban
// closes the user's clients on this node at once.
func (n *Node) onModeration(_ string, p []byte) {
	ev, err := moderation.DecodeEvent(p)
	if err != nil {
		return
	}
	n.modc.drop(ev.User) // re-read at the next check: the change is in Redis already
	code := 0
	switch ev.Type {
	case "kick":
		code = CloseKicked
	case "ban":
		code = CloseBanned
	default:
		return
	}
	reason := ev.Reason
	if reason == "" {
		reason = ev.Type
	}
	for _, c := range n.hub.UserClients(ev.User) {
		c.Close(code, clip(reason, 120))
	}
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
