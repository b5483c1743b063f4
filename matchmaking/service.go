package matchmaking

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// Config configures a Service. The zero value is usable (no queues).
type Config struct {
	// Prefix is the key prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// Queues returns the current value of the live setting
	// matchmaking.queues (settings.Store.String); it is called on every
	// operation and parsed once per distinct value. nil = no queues. A
	// value that does not parse (the registry refuses such writes) is
	// logged and the last good one kept.
	Queues func() string
	// StatusTTL is how long an ended ticket's status and a match's record
	// are kept after the end, for pollers; 0 = 10 minutes.
	StatusTTL time.Duration
	// InviteTTL is how long a party's invitations wait for their
	// acceptance (Invite); 0 = 60 s. A party not accepted by every member
	// by then expires, and its players are told (OnExpired).
	InviteTTL time.Duration
	// Clock tells the time of submissions, waits and matches; nil =
	// time.Now. Nodes' clocks should agree (NTP): a ticket's wait is the
	// matcher's now minus the submitting node's.
	Clock func() time.Time
	// Registerer receives the metrics; nil = not registered.
	Registerer prometheus.Registerer
	// Logger receives refused definitions and announcement failures; nil
	// = slog.Default().
	Logger *slog.Logger
}

// Service submits, cancels and reads tickets. It is safe for concurrent
// use; make one per node. Matches are formed by Matchers.
type Service struct {
	rdb       redis.UniversalClient
	ks        keyspace.Space
	source    func() string
	statusTTL time.Duration
	inviteTTL time.Duration
	now       func() time.Time
	log       *slog.Logger
	m         *metrics

	defs atomic.Pointer[parsedDefs]
}

// parsedDefs is one parsed value of the setting.
type parsedDefs struct {
	raw    string
	queues []Queue
}

const (
	defaultStatusTTL = 10 * time.Minute
	defaultInviteTTL = time.Minute
)

// New returns a Service on rdb.
func New(rdb redis.UniversalClient, cfg Config) *Service {
	if cfg.StatusTTL <= 0 {
		cfg.StatusTTL = defaultStatusTTL
	}
	if cfg.InviteTTL <= 0 {
		cfg.InviteTTL = defaultInviteTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Queues == nil {
		cfg.Queues = func() string { return "" }
	}
	s := &Service{
		rdb:       rdb,
		ks:        keyspace.New(cfg.Prefix),
		source:    cfg.Queues,
		statusTTL: max(cfg.StatusTTL, time.Second),
		inviteTTL: max(cfg.InviteTTL, time.Second),
		now:       cfg.Clock,
		log:       cfg.Logger.With("component", "matchmaking"),
		m:         newMetrics(cfg.Registerer),
	}
	s.defs.Store(&parsedDefs{})
	return s
}

// Queues returns the queues defined now, sorted by name.
func (s *Service) Queues() []Queue {
	return append([]Queue(nil), s.current().queues...)
}

// Queue returns the definition of the queue name, or ErrUnknownQueue.
func (s *Service) Queue(name string) (Queue, error) {
	for _, q := range s.current().queues {
		if q.Name == name {
			return q, nil
		}
	}
	return Queue{}, s.unknownQueue(name)
}

func (s *Service) unknownQueue(name string) error {
	var known []string
	for _, q := range s.current().queues {
		known = append(known, q.Name)
	}
	if len(known) == 0 {
		return fmt.Errorf("%w: %q: no queue is defined (matchmaking.queues)", ErrUnknownQueue, clip(name))
	}
	return fmt.Errorf("%w: %q; the queues are %s", ErrUnknownQueue, clip(name), strings.Join(known, ", "))
}

// current returns the parsed definitions of the setting's current value.
func (s *Service) current() *parsedDefs {
	raw := s.source()
	d := s.defs.Load()
	if raw == d.raw {
		return d
	}
	qs, err := ParseQueues(raw)
	if err != nil {
		// Keep the last good definitions, but remember the bad value so it
		// is logged once, not on every call.
		s.log.Error("matchmaking.queues does not parse; keeping the previous queues", "err", err)
		nd := &parsedDefs{raw: raw, queues: d.queues}
		s.defs.CompareAndSwap(d, nd)
		return nd
	}
	nd := &parsedDefs{raw: raw, queues: qs}
	s.defs.CompareAndSwap(d, nd)
	return nd
}

// keep is the TTL of a queue's keys and of a waiting ticket, refreshed by
// every submission and formation: a queue nobody touches for that long
// (no node ran its matcher) is forgotten, tickets and all.
func (s *Service) keep(q Queue) time.Duration { return q.MaxWait + s.statusTTL + time.Hour }

func (s *Service) keys(queue string) keys { return keys{ks: s.ks, queue: queue} }

// Submit enqueues t in queue and returns the ticket's id.
//
// A party in t is queued as given: the caller vouches that every member
// agreed. Users reach the queue through Invite and Accept, which ask them;
// the transport refuses a party in a ticket with ErrConsentRequired.
//
// One script checks that no member of the ticket (t.User and t.Party) has
// an open ticket in the queue and enqueues it: the pool entry, the age
// index, the user map and the ticket's hash, together. A retry of a call
// whose answer was lost finds its own ticket and answers the same id.
//
// Submit returns ErrUnknownQueue for a queue that is not defined, an error
// wrapping ErrBadName for a malformed user name, ErrBadTicket for a party,
// skill or attributes out of bounds, a *TicketOpenError (ErrTicketOpen) when
// a member already has an open ticket in the queue, and Redis errors, all
// wrapped with the queue.
func (s *Service) Submit(ctx context.Context, queue string, t Ticket) (string, error) {
	q, err := s.Queue(queue)
	if err != nil {
		return "", fmt.Errorf("matchmaking: submit to %s: %w", clip(queue), err)
	}
	t, err = t.check(q)
	if err != nil {
		return "", fmt.Errorf("matchmaking: submit to %s: %w", queue, err)
	}
	id, fresh, err := s.enqueue(ctx, q, t, newTicketID())
	if err != nil {
		return "", fmt.Errorf("matchmaking: submit to %s: %w", queue, err)
	}
	if fresh {
		s.m.tickets.WithLabelValues(queue, "submitted").Inc()
	}
	return id, nil
}

// enqueue runs ticket_submit.lua for the checked ticket t with id; fresh
// is false when the script found the ticket enqueued already (a retry).
func (s *Service) enqueue(ctx context.Context, q Queue, t Ticket, id string) (_ string, fresh bool, _ error) {
	attrs := attrsJSON(t.Attributes)
	entry := entryOf(bucketOf(attrs), t.Skill, t.Size(), id)
	k := s.keys(q.Name)
	args := []any{id, entry, ms(s.now()), s.keep(q).Milliseconds(), t.User, strings.Join(t.Party, " "),
		strconv.FormatFloat(t.Skill, 'g', -1, 64), attrs}
	typed := map[string]string{} // canonical → as given, for the error
	for _, p := range t.Players() {
		c := names.Canonical(p)
		typed[c] = p
		args = append(args, c)
	}
	// The script finds its own retry by the ticket's hash, which an ended
	// ticket keeps for the status TTL (10 minutes by default): go-redis's
	// copy of the call (see redisx.CallBound) must come before that.
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	v, err := redisx.Run(ctx, s.rdb, ticketSubmitScript, []string{k.pool(), k.age(), k.users(), k.ticket(id), k.fresh()}, args...).Slice()
	if err != nil {
		return "", false, err
	}
	if len(v) == 3 && v[0] == int64(0) {
		open, _ := v[1].(string)
		user, _ := v[2].(string)
		if u, ok := typed[user]; ok {
			user = u
		}
		return "", false, &TicketOpenError{Queue: q.Name, User: user, Ticket: open}
	}
	if len(v) != 2 {
		return "", false, errUnexpectedReply
	}
	return id, v[0] == int64(1), nil
}

var errUnexpectedReply = errors.New("matchmaking: unexpected script reply")

// Cancel takes the waiting ticket id out of queue, or dissolves the
// pending party id, and returns its status after: cancelled, or how it had ended before (matched, expired,
// cancelled; nothing is changed then). The queue need not be defined any
// more. It returns ErrUnknownTicket for a
// ticket the queue does not hold (never submitted, or ended longer ago
// than the status TTL), and Redis errors, wrapped with the queue.
func (s *Service) Cancel(ctx context.Context, queue, id string) (Status, error) {
	if err := checkQueueName(queue); err != nil {
		return Status{}, fmt.Errorf("matchmaking: cancel in %s: %w: %w", clip(queue), ErrUnknownQueue, err)
	}
	if !checkTicketID(id) {
		return Status{}, fmt.Errorf("matchmaking: cancel in %s: %w: %q is not a ticket id", queue, ErrUnknownTicket, clip(id))
	}
	k := s.keys(queue)
	v, err := redisx.Run(ctx, s.rdb, ticketCancelScript, []string{k.pool(), k.age(), k.users(), k.ticket(id), k.pending()},
		id, ms(s.now()), s.statusTTL.Milliseconds()).Slice()
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: cancel %s in %s: %w", id, queue, err)
	}
	if len(v) == 0 {
		return Status{}, fmt.Errorf("matchmaking: cancel %s in %s: %w", id, queue, ErrUnknownTicket)
	}
	fields, ok := v[1].([]any)
	if len(v) != 2 || !ok {
		return Status{}, fmt.Errorf("matchmaking: cancel %s in %s: %w", id, queue, errUnexpectedReply)
	}
	st, err := s.status(ctx, queue, id, pairsOf(fields))
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: cancel %s in %s: %w", id, queue, err)
	}
	if v[0] == int64(1) {
		s.m.tickets.WithLabelValues(queue, "cancelled").Inc()
	}
	return st, nil
}

// CancelUser cancels user's open ticket in queue (user may be any member
// of its party: the whole ticket leaves) as Cancel does. It returns
// ErrUnknownTicket when user has no open ticket there.
func (s *Service) CancelUser(ctx context.Context, queue, user string) (Status, error) {
	if err := checkQueueName(queue); err != nil {
		return Status{}, fmt.Errorf("matchmaking: cancel in %s: %w: %w", clip(queue), ErrUnknownQueue, err)
	}
	id, err := s.rdb.HGet(ctx, s.keys(queue).users(), names.Canonical(user)).Result()
	if errors.Is(err, redis.Nil) {
		return Status{}, fmt.Errorf("matchmaking: cancel in %s: %w: %s has no open ticket", queue, ErrUnknownTicket, clip(user))
	}
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: cancel %s's ticket in %s: %w", clip(user), queue, err)
	}
	return s.Cancel(ctx, queue, id)
}

// Status returns what became of ticket id in queue: waiting, or matched
// (with the match), expired or cancelled, for the status TTL after its
// end. It returns ErrUnknownTicket when the queue holds no such ticket, and
// Redis errors, wrapped with the queue. The queue need not be defined any
// more.
func (s *Service) Status(ctx context.Context, queue, id string) (Status, error) {
	if err := checkQueueName(queue); err != nil {
		return Status{}, fmt.Errorf("matchmaking: status in %s: %w: %w", clip(queue), ErrUnknownQueue, err)
	}
	if !checkTicketID(id) {
		return Status{}, fmt.Errorf("matchmaking: status in %s: %w: %q is not a ticket id", queue, ErrUnknownTicket, clip(id))
	}
	h, err := s.rdb.HGetAll(ctx, s.keys(queue).ticket(id)).Result()
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: status of %s in %s: %w", id, queue, err)
	}
	if len(h) == 0 {
		return Status{}, fmt.Errorf("matchmaking: status of %s in %s: %w", id, queue, ErrUnknownTicket)
	}
	st, err := s.status(ctx, queue, id, h)
	if err != nil {
		return Status{}, fmt.Errorf("matchmaking: status of %s in %s: %w", id, queue, err)
	}
	return st, nil
}

// status builds a Status from a ticket's hash, reading its match when it
// was matched.
func (s *Service) status(ctx context.Context, queue, id string, h map[string]string) (Status, error) {
	t, err := ticketOf(queue, id, h)
	if err != nil {
		return Status{}, err
	}
	st := Status{Ticket: t, State: State(h["state"]), Ended: fromMS(h["ended"])}
	if st.State == Waiting {
		since, err := s.rdb.Get(ctx, s.keys(queue).trouble()).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return Status{}, err
		}
		st.TroubleSince = fromMS(since)
		return st, nil
	}
	if st.State != Matched {
		return st, nil
	}
	seq, err := strconv.ParseInt(h["match"], 10, 64)
	if err != nil {
		return Status{}, fmt.Errorf("%w: ticket %s has match %q", errUnexpectedReply, id, h["match"])
	}
	mh, err := s.rdb.HGetAll(ctx, s.keys(queue).match(seq)).Result()
	if err != nil {
		return Status{}, err
	}
	if len(mh) > 0 {
		m, err := matchOf(queue, mh)
		if err != nil {
			return Status{}, err
		}
		st.Match = &m
	}
	return st, nil
}

// Depth is what Depth reports about a queue.
type Depth struct {
	// Tickets is the number of waiting tickets.
	Tickets int64 `json:"tickets"`
	// OldestWait is how long the oldest waiting ticket has waited; 0 when
	// none waits.
	OldestWait time.Duration `json:"oldest_wait"`
}

// Depth returns how many tickets wait in queue and how long the oldest
// has, in one round trip (for the admin console). It returns
// ErrUnknownQueue for a malformed name and Redis errors.
func (s *Service) Depth(ctx context.Context, queue string) (Depth, error) {
	if err := checkQueueName(queue); err != nil {
		return Depth{}, fmt.Errorf("matchmaking: depth of %s: %w: %w", clip(queue), ErrUnknownQueue, err)
	}
	k := s.keys(queue)
	var card *redis.IntCmd
	var oldest *redis.ZSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		card = p.ZCard(ctx, k.age())
		oldest = p.ZRangeWithScores(ctx, k.age(), 0, 0)
		return nil
	})
	if err != nil {
		return Depth{}, fmt.Errorf("matchmaking: depth of %s: %w", queue, err)
	}
	d := Depth{Tickets: card.Val()}
	if z := oldest.Val(); len(z) == 1 {
		d.OldestWait = max(0, s.now().Sub(time.UnixMilli(int64(z[0].Score))))
	}
	return d, nil
}

// pairsOf turns a flat HGETALL reply from a script into a map.
func pairsOf(v []any) map[string]string {
	h := make(map[string]string, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		k, _ := v[i].(string)
		val, _ := v[i+1].(string)
		h[k] = val
	}
	return h
}
