package matchmaking

import (
	"errors"
	"fmt"

	"github.com/chatd/chatd/errcode"
)

// Errors returned by this package, wrapped with the operation and the queue
// ("matchmaking: submit duel: matchmaking: unknown queue: …"); compare them
// with errors.Is, or read their code with errcode.Of.
var (
	// ErrUnknownQueue: the queue is not defined in matchmaking.queues.
	ErrUnknownQueue = errcode.New(errcode.UnknownQueue, "matchmaking: unknown queue")
	// ErrUnknownTicket: no such ticket in the queue (never submitted, or
	// its status TTL passed), or a user has no open ticket there.
	ErrUnknownTicket = errcode.New(errcode.UnknownTicket, "matchmaking: unknown ticket")
	// ErrTicketOpen: a member of the ticket already has an open ticket in
	// the queue. The error is a *TicketOpenError naming it.
	ErrTicketOpen = errcode.New(errcode.TicketOpen, "matchmaking: a ticket is already open")
	// ErrConsentRequired: a ticket names other users in its party. A
	// party is formed by invitation (Invite) and queues once every member
	// has accepted (Accept): nobody is queued by someone else.
	ErrConsentRequired = errcode.New(errcode.ConsentRequired, "matchmaking: a party needs its members' consent")
	// ErrNotPending: an acceptance of a party that is no longer pending
	// (queued, matched, expired, or dissolved).
	ErrNotPending = errcode.New(errcode.Conflict, "matchmaking: the party is no longer pending")
	// ErrBadTicket: a ticket's skill, party or attributes are out of bounds.
	ErrBadTicket = errcode.New(errcode.BadValue, "matchmaking: bad ticket")
	// ErrBadName: a user name in a ticket is malformed; it also wraps
	// names.ErrBadName.
	ErrBadName = errcode.New(errcode.BadName, "matchmaking: bad name")
	// ErrBadQueues: a queue definition (matchmaking.queues) is malformed
	// or out of bounds.
	ErrBadQueues = errcode.New(errcode.BadValue, "matchmaking: bad queue definitions")
	// ErrStarted: Matchers.Start was called twice.
	ErrStarted = errors.New("matchmaking: matchers already started")
)

// TicketOpenError is Submit's refusal when a member already has an open
// ticket in the queue: User is that member, Ticket the open ticket (which a
// retrying client can poll or cancel). It matches ErrTicketOpen with
// errors.Is and carries errcode.TicketOpen.
type TicketOpenError struct {
	Queue  string
	User   string
	Ticket string
}

func (e *TicketOpenError) Error() string {
	return fmt.Sprintf("%s: user %s already has ticket %s in queue %s", ErrTicketOpen.Message, e.User, e.Ticket, e.Queue)
}

// ErrorCode returns errcode.TicketOpen.
func (e *TicketOpenError) ErrorCode() errcode.Code { return errcode.TicketOpen }

// ClientMessage words the refusal for a client.
func (e *TicketOpenError) ClientMessage() string {
	return fmt.Sprintf("user %s already has an open ticket (%s) in queue %s; cancel it or wait for it", e.User, e.Ticket, e.Queue)
}

// Is makes errors.Is(err, ErrTicketOpen) true.
func (e *TicketOpenError) Is(target error) bool { return target == ErrTicketOpen }
