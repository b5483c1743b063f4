package match

import (
	"context"

	"github.com/chatd/chatd/matchmaking"
)

// What the tests of package match_test reach inside: the matchers' hooks,
// and the matchmaking service the use case runs.

// Matched runs the hook of a match made (as a matcher does).
func (mm *Matchmaking) Matched(ctx context.Context, m matchmaking.Match) error {
	return mm.matched(ctx, m)
}

// Expired runs the hook of a ticket expired (as a matcher does).
func (mm *Matchmaking) Expired(ctx context.Context, t matchmaking.Ticket) error {
	return mm.expired(ctx, t)
}

// Service is the matchmaking service the use case runs.
func (mm *Matchmaking) Service() *matchmaking.Service { return mm.svc.(*matchmaking.Service) }
