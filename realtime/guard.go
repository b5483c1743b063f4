package realtime

import (
	"context"
	"time"

	"github.com/chatd/chatd/moderation"
)

// modStatus is what the core needs of moderation: a user's status, from
// the node's cache (moderation.Guard).
type modStatus interface {
	Status(ctx context.Context, user string) (moderation.Status, error)
}

var _ modStatus = (*moderation.Guard)(nil)

// Moderated turns a user's moderation status into the core's refusals: a
// say of a muted user (Chat), any request or connection of a banned one
// (Sessions).
type Moderated struct {
	status modStatus
	now    func() time.Time
}

// Banned returns a *BannedError while user is banned.
func (g *Moderated) Banned(ctx context.Context, user string) error {
	st, err := g.status.Status(ctx, user)
	if err != nil {
		return err
	}
	if st.Banned && g.now().Before(st.BanUntil) {
		return &BannedError{Until: st.BanUntil}
	}
	return nil
}

// Muted returns a *MutedError while user is muted.
func (g *Moderated) Muted(ctx context.Context, user string) error {
	st, err := g.status.Status(ctx, user)
	if err != nil {
		return err
	}
	if st.Muted && g.now().Before(st.MuteUntil) {
		return &MutedError{Until: st.MuteUntil}
	}
	return nil
}

// NewModerated is the refusals of the statuses status reads (the node's
// moderation.Guard), at the clock now.
func NewModerated(status modStatus, now func() time.Time) *Moderated {
	return &Moderated{status: status, now: now}
}

// Moderated closes user's clients on this node on a kick (4001) or a ban
// (4003), wherever it was decided: moderation.Guard's OnEvent.
func (h *Hub) Moderated(ev moderation.Event) {
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
	h.CloseUser(ev.User, "", code, ClipRunes(reason, 120))
}
