package chat

import (
	"context"
)

// What the tests of package chat_test reach inside: the presence loop's
// retry and write of one user, the seat renewal's tick.

// TouchUser writes this node's presence claim for user now.
func (ch *Chat) TouchUser(ctx context.Context, user string) { ch.touchUser(ctx, user) }

// PresenceFailed queues user for a rewrite at the next presence tick, as a
// failed write does.
func (ch *Chat) PresenceFailed(user string) { ch.pstate.failed(user) }

// RenewSeats runs one tick of the seat renewal.
func (ch *Chat) RenewSeats(ctx context.Context) { (&keeper{ch: ch}).renewSeats(ctx) }

// PresenceTicks reports the presence ticks done and those that wrote
// every user.
func (ch *Chat) PresenceTicks() (ticks, fulls uint64) {
	return ch.pstate.tick.Load(), ch.pstate.fulls.Load()
}

// TouchPresence runs one tick of the presence loop, the guests' names
// renewed first.
func (ch *Chat) TouchPresence(ctx context.Context) { (&keeper{ch: ch}).touchPresence(ctx, ch.names) }
