package chat

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
)

// The chat's hooks (package hooks): the join hook is asked before a seat
// is claimed (WebSocket and REST joins: Chat.join), the publish hook
// before a message is stored (WebSocket says and REST posts: Chat.send,
// on the sender's own say worker or request, never in a shared loop, with
// no lock held and no script open). With Config.Hooks nil neither runs
// and the say path is unchanged (one nil check per batch).

// joinHook asks the backend whether p may take a seat in lobby.
func (ch *Chat) joinHook(ctx context.Context, p realtime.Principal, lobby string) error {
	return ch.hooks.Join(ctx, hooks.JoinRequest{User: p.User, Session: p.Session, Lobby: lobby})
}

// publishHook asks the backend about each message of batch (the says of
// reqs at idx) whose lobby is in the publish hook's scope, in order: a
// refused one is answered in out and dropped from the batch (stored
// nowhere), a replaced text replaces the message's. It returns the batch
// left and its indexes.
func (ch *Chat) publishHook(ctx context.Context, s sender, reqs []realtime.Say, batch []rooms.SendRequest, idx []int, out []sendResult) ([]rooms.SendRequest, []int) {
	keep, kidx := batch[:0], idx[:0]
	for j, r := range batch {
		lobby, _, err := rooms.ParseRoom(r.Room)
		if err != nil || !ch.hooks.Applies(hooks.Publish, lobby) {
			keep, kidx = append(keep, r), append(kidx, idx[j])
			continue
		}
		i := idx[j]
		text, err := ch.hooks.Publish(ctx, hooks.PublishRequest{User: s.p.User, Session: s.p.Session, Room: r.Room, Lobby: lobby,
			Text: r.Text, Ref: reqs[i].Ref})
		if err == nil && text != r.Text {
			if cerr := ch.CheckSay(r.Room, text); cerr != nil {
				err = fmt.Errorf("%w: the publish hook's text: %w", hooks.ErrUnavailable, cerr)
			}
		}
		if err != nil {
			out[i].err = err
			continue
		}
		r.Text = text
		keep, kidx = append(keep, r), append(kidx, i)
	}
	return keep, kidx
}

// hookData is hello's data: what the connect hook attached, or none.
func hookData(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}
