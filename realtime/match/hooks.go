package match

import (
	"context"
	"encoding/json"

	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/matchmaking"
)

// matchHook tells the application's backend of a formed match (package
// hooks) and returns the data every player's matched event carries (nil =
// none). The answer of the first call is kept by match, so the matcher's
// retries of the same match (OnMatched runs at least once per match) tell
// the same data on every node. It runs in the queue's matcher, after the
// room was made, with no Redis script open; a backend failing closed
// returns an error, and the matcher announces the match again after its
// backoff. With the hook off, or the queue out of its scope, it returns
// nil at once.
func (mm *Matchmaking) matchHook(ctx context.Context, m matchmaking.Match, room string) (json.RawMessage, error) {
	if !mm.hooks.Applies(hooks.Match, m.Queue) {
		return nil, nil
	}
	req := hooks.MatchRequest{Match: m.ID, Queue: m.Queue, Room: room, Players: m.Players}
	for _, t := range m.Tickets {
		req.Tickets = append(req.Tickets, hooks.MatchTicket{ID: t.ID, Players: t.Players()})
	}
	return mm.hooks.Match(ctx, req)
}
