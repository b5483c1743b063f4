package matchmaking

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// Invite forms a pending party: t's user leads, t.Party are invited, and
// the ticket (its id is returned in the Status) waits for their acceptance
// (Accept) until Config.InviteTTL has passed. A pending party is in no
// queue index: it queues nobody and blocks nobody — its members may submit
// their own tickets, and be invited to other parties, meanwhile. Declining
// is Cancel, by any of its players.
//
// Invite returns ErrUnknownQueue, an error wrapping ErrBadName for a
// malformed name, ErrBadTicket for a ticket out of bounds (a party of
// none, one naming its leader in any case or a member twice, too large),
// and Redis errors, wrapped with the queue.
func (s *Service) Invite(ctx context.Context, queue string, t Ticket) (Status, error) {
	q, err := s.Queue(queue)
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: invite to %s: %w", clip(queue), err)
	}
	if len(t.Party) == 0 {
		return Status{}, fmt.Errorf("matchmaking: invite to %s: %w: a party names at least one other user; submit a ticket to queue alone", queue, ErrBadTicket)
	}
	t, err = t.check(q)
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: invite to %s: %w", queue, err)
	}
	id := newTicketID()
	now := s.now()
	deadline := now.Add(s.inviteTTL)
	attrs := attrsJSON(t.Attributes)
	k := s.keys(q.Name)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, k.ticket(id), "state", string(Pending), "entry", entryOf(bucketOf(attrs), t.Skill, t.Size(), id),
			"created", ms(now), "user", t.User, "party", strings.Join(t.Party, " "),
			"skill", strconv.FormatFloat(t.Skill, 'g', -1, 64), "attrs", attrs, "accepted", "", "expires", ms(deadline))
		// Kept past the deadline for the expiry to find and report it.
		p.PExpire(ctx, k.ticket(id), s.inviteTTL+s.statusTTL)
		p.ZAdd(ctx, k.pending(), redis.Z{Score: float64(ms(deadline)), Member: id})
		p.PExpire(ctx, k.pending(), s.keep(q))
		return nil
	})
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: invite to %s: %w", queue, err)
	}
	s.m.tickets.WithLabelValues(queue, "invited").Inc()
	return s.Status(ctx, queue, id)
}

// Accept records user's acceptance of the pending party id and returns
// its status after: still pending, or waiting in the queue when user was
// the last invitee to accept (the one-open-ticket rule applies then, to
// every member), or matched since. An acceptance asked again once the party
// has queued (a retry) is answered so too, not refused. A party whose
// invitations lapsed is expired by the call.
// It returns ErrUnknownTicket when there is no such ticket or user is not
// one of its invitees (the leader accepted by inviting), ErrNotPending
// (with the status) when the ticket is no longer pending, a
// *TicketOpenError when a member has an open ticket in the queue (nothing
// is recorded: accept again once it is gone), and Redis errors.
func (s *Service) Accept(ctx context.Context, queue, id, user string) (Status, error) {
	if err := checkQueueName(queue); err != nil {
		return Status{}, fmt.Errorf("matchmaking: accept in %s: %w: %w", clip(queue), ErrUnknownQueue, err)
	}
	if !checkTicketID(id) {
		return Status{}, fmt.Errorf("matchmaking: accept in %s: %w: %q is not a ticket id", queue, ErrUnknownTicket, clip(id))
	}
	keep := s.statusTTL + time.Hour
	if q, err := s.Queue(queue); err == nil {
		keep = s.keep(q)
	}
	k := s.keys(queue)
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	v, err := redisx.Run(ctx, s.rdb, partyAcceptScript,
		[]string{k.pool(), k.age(), k.users(), k.ticket(id), k.fresh(), k.pending(), k.outbox()},
		id, names.Canonical(user), ms(s.now()), keep.Milliseconds(), s.statusTTL.Milliseconds()).Slice()
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: accept %s in %s: %w", id, queue, err)
	}
	if len(v) == 0 {
		return Status{}, fmt.Errorf("matchmaking: accept %s in %s: %w", id, queue, ErrUnknownTicket)
	}
	if len(v) == 3 && v[0] == int64(2) {
		open, _ := v[1].(string)
		member, _ := v[2].(string)
		return Status{}, fmt.Errorf("matchmaking: accept %s in %s: %w", id, queue, &TicketOpenError{Queue: queue, User: member, Ticket: open})
	}
	fields, ok := v[1].([]any)
	if len(v) != 2 || !ok {
		return Status{}, fmt.Errorf("matchmaking: accept %s in %s: %w", id, queue, errUnexpectedReply)
	}
	st, err := s.status(ctx, queue, id, pairsOf(fields))
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: accept %s in %s: %w", id, queue, err)
	}
	switch v[0] {
	case int64(0):
		return st, fmt.Errorf("matchmaking: accept %s in %s: %w: it is %s", id, queue, ErrNotPending, st.State)
	case int64(3):
		// user's acceptance, recorded before: its retry (the Redis
		// client's, whose first answer was lost, or the user's own) is
		// answered as the acceptance was, and counts nothing again
		return st, nil
	}
	if st.State == Waiting {
		s.m.tickets.WithLabelValues(queue, "submitted").Inc()
	}
	return st, nil
}

// expirePending expires up to n pending parties of queue whose
// invitations' deadline passed; their "x:ID" entries join the outbox, for
// the holder's drain to announce (OnExpired).
func (s *Service) expirePending(ctx context.Context, queue string, n int) error {
	k := s.keys(queue)
	now := ms(s.now())
	ids, err := s.rdb.ZRangeByScore(ctx, k.pending(), &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(now, 10), Count: int64(n)}).Result()
	if err != nil || len(ids) == 0 {
		return err
	}
	ks := []string{k.pending(), k.outbox()}
	args := []any{now, s.statusTTL.Milliseconds()}
	// KEYS[i] and ARGV[i] name the same ticket from 3 on.
	for _, id := range ids {
		if !checkTicketID(id) {
			if err := s.rdb.ZRem(ctx, k.pending(), id).Err(); err != nil { // written by hand
				return err
			}
			continue
		}
		ks = append(ks, k.ticket(id))
		args = append(args, id)
	}
	return redisx.Run(ctx, s.rdb, partyExpireScript, ks, args...).Err()
}

// pendingParties returns up to n pending parties of queue, those whose
// invitations lapse first, in one round trip after the index's.
func (s *Service) pendingParties(ctx context.Context, queue string, n int) ([]Status, error) {
	k := s.keys(queue)
	ids, err := s.rdb.ZRange(ctx, k.pending(), 0, int64(n)-1).Result()
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return !checkTicketID(id) })
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, k.ticket(id))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(cmds))
	for i, c := range cmds {
		h := c.Val()
		if h["state"] != string(Pending) {
			continue
		}
		t, err := ticketOf(queue, ids[i], h)
		if err != nil {
			continue
		}
		out = append(out, Status{Ticket: t, State: Pending})
	}
	return out, nil
}
