package matchmaking

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/lock"
)

// holder runs one queue's matcher while this node holds the queue's lock.
type holder struct {
	m      *Matchers
	svc    *Service
	queue  string
	l      *lock.Lock
	lastOK time.Time // when the last refresh that succeeded was sent
	warned time.Time // when a failed round was last logged
	failed int       // rounds failed in a row
	since  time.Time // when the first of them failed
	cancel context.CancelCauseFunc

	checked time.Time // when OnPending was last called

	acks  []string              // outbox members announced, ZREM'd by the next pick
	retry map[string]retryState // outbox members whose hook failed
}

// retryState is when an announcement whose hook failed is tried again.
type retryState struct {
	next    time.Time
	backoff time.Duration
}

var errLost = errors.New("matchmaking: queue lock lost")

// run is the matcher loop: keep the lease, run a round, pause Tick (none
// after a full round). It returns why it stopped.
func (h *holder) run(ctx context.Context) error {
	h.svc.m.holding.WithLabelValues(h.queue).Set(1)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
		if err := h.keepAlive(ctx); err != nil {
			return err
		}
		more, err := h.round(ctx)
		if h.m.afterRound != nil {
			h.m.afterRound(h.queue)
		}
		switch {
		case errors.Is(err, lock.ErrFenceStale):
			h.svc.m.fenceRejected.WithLabelValues(h.queue).Inc()
			return err
		case errors.Is(err, errLost), errors.Is(err, errQueueRemoved):
			return err
		case err != nil && ctx.Err() == nil:
			// Logged once per 10 s: a Redis outage fails every round.
			if time.Since(h.warned) >= 10*time.Second {
				h.warned = time.Now()
				h.svc.log.Warn("matchmaking: matcher round failed; retrying every tick", "queue", h.queue, "err", err)
			}
			h.fail(ctx)
			more = false
		case err == nil && h.failed > 0:
			h.recovered(ctx)
		}
		next := h.m.cfg.Tick
		if more {
			next = 0
		}
		t.Reset(next)
	}
}

// troubleAfter is how many rounds in a row must fail before the waiting
// tickets say so (Status.Trouble): one failure is a blip.
const troubleAfter = 3

// fail counts a failed round; from the troubleAfter-th in a row on, it
// writes (and refreshes) the queue's trouble key, which Status shows on
// its waiting tickets, so that a client waiting for a match learns that
// matching is failing, not only the log. Best effort: when Redis itself
// is what fails, the client's own calls fail too.
func (h *holder) fail(ctx context.Context) {
	if h.failed == 0 {
		h.since = h.svc.now()
	}
	h.failed++
	if h.failed < troubleAfter {
		return
	}
	ttl := 10*time.Second + 3*h.m.cfg.Tick
	_ = h.svc.rdb.Set(ctx, h.svc.keys(h.queue).trouble(), ms(h.since), ttl).Err() // best effort, see above
}

// recovered clears the trouble after a round that succeeded.
func (h *holder) recovered(ctx context.Context) {
	if h.failed >= troubleAfter {
		if err := h.svc.rdb.Del(ctx, h.svc.keys(h.queue).trouble()).Err(); err != nil {
			return // the next round tries again
		}
	}
	h.failed = 0
}

// keepAlive refreshes the lease when a third of it has passed since the
// last refresh. The refresh runs in the matcher's own loop, not beside it:
// a matcher that stalls (a pause, a hung hook) stops refreshing and loses
// the queue to another node, whose fence then refuses the stalled one's
// formation. It returns errLost once the lock is gone or Redis has not
// confirmed it for a whole lease.
func (h *holder) keepAlive(ctx context.Context) error {
	select {
	case <-h.l.Lost():
		return errLost
	default:
	}
	lease := h.m.cfg.Lease
	if time.Since(h.lastOK) < lease/3 {
		return nil
	}
	sent := time.Now()
	rctx, cancel := context.WithDeadline(ctx, h.lastOK.Add(lease))
	err := h.l.Refresh(rctx, lease)
	cancel()
	switch {
	case err == nil:
		h.lastOK = sent
		return nil
	case errors.Is(err, lock.ErrNotHeld):
		return fmt.Errorf("%w: %w", errLost, err)
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case time.Since(h.lastOK) >= lease:
		return fmt.Errorf("%w: no refresh confirmed for %v: %w", errLost, lease, err)
	}
	return nil // try again at the next round
}

// pick is queue_pick.lua's reply.
type pick struct {
	depth    int64
	oldest   int64 // created ms of the oldest ticket, -1 for none
	outbox   int64
	first    int64
	matches  [][]string
	expiries []string
	fresh    int64 // submitted tickets not yet seeded
}

// round is one matcher round: choose (queue_pick.lua), form and expire
// under the fence (match_form.lua), announce. more says a full round was
// found, so the next should run at once.
func (h *holder) round(ctx context.Context) (more bool, err error) {
	h.svc.m.ticks.WithLabelValues(h.queue).Inc()
	q, err := h.svc.Queue(h.queue)
	if err != nil {
		return false, errQueueRemoved
	}
	// Pending parties past their invitations' deadline expire first, so
	// that this round's drain announces them.
	if err := h.svc.expirePending(ctx, h.queue, h.m.cfg.MaxMatches); err != nil {
		return false, fmt.Errorf("expire parties: %w", err)
	}
	if h.m.cfg.OnPending != nil && time.Since(h.checked) >= h.m.cfg.PendingEvery {
		h.checked = time.Now()
		if err := h.checkPending(ctx); err != nil {
			return false, fmt.Errorf("check parties: %w", err)
		}
	}
	k := h.svc.keys(h.queue)
	now := h.svc.now()
	cutoff := ms(now) - q.MaxWait.Milliseconds()
	maxMatches := max(1, min(h.m.cfg.MaxMatches, maxRoundTickets/q.MaxSize))
	maxExpired := h.m.cfg.MaxMatches
	args := []any{ms(now), q.MinSize, q.MaxSize, luaNum(q.Window), luaNum(q.WidenPerSecond), cutoff,
		max(h.m.cfg.Seeds, maxMatches), maxMatches, maxExpired, 2*q.MaxSize + 8, h.m.cfg.FreshSeeds, h.m.cfg.SweepSeeds}
	for _, a := range h.acks {
		args = append(args, a)
	}
	v, err := redisx.Run(ctx, h.svc.rdb, queuePickScript, []string{k.pool(), k.age(), k.outbox(), k.seq(), k.fresh(), k.sweep()}, args...).Slice()
	if err != nil {
		return false, fmt.Errorf("pick: %w", err)
	}
	h.acks = h.acks[:0]
	p, err := parsePick(v)
	if err != nil {
		return false, err
	}
	h.svc.m.depth.WithLabelValues(h.queue).Set(float64(p.depth))
	oldest := 0.0
	if p.oldest > 0 {
		oldest = max(0, now.Sub(time.UnixMilli(p.oldest)).Seconds())
	}
	h.svc.m.oldest.WithLabelValues(h.queue).Set(oldest)

	if h.leftovers(p.outbox) {
		if err := h.drain(ctx); err != nil {
			return false, err
		}
	}
	if len(p.matches) == 0 && len(p.expiries) == 0 {
		return p.fresh > 0, nil
	}
	if h.m.beforeForm != nil {
		h.m.beforeForm(ctx, h.queue, h.l)
	}
	if err := h.form(ctx, q, cutoff, p); err != nil {
		return false, err
	}
	return len(p.matches) == maxMatches || len(p.expiries) == maxExpired || p.fresh > 0, nil
}

func parsePick(v []any) (pick, error) {
	bad := fmt.Errorf("pick: %w", errUnexpectedReply)
	var p pick
	if len(v) != 7 {
		return pick{}, bad
	}
	p.fresh, _ = v[6].(int64)
	var ok [4]bool
	p.depth, ok[0] = v[0].(int64)
	p.oldest, ok[1] = v[1].(int64)
	p.outbox, ok[2] = v[2].(int64)
	p.first, ok[3] = v[3].(int64)
	if ok != [4]bool{true, true, true, true} {
		return pick{}, bad
	}
	ms, _ := v[4].([]any)
	for _, m := range ms {
		entries, _ := m.([]any)
		var match []string
		for _, e := range entries {
			s, _ := e.(string)
			if _, ok := idOfEntry(s); !ok {
				return pick{}, bad
			}
			match = append(match, s)
		}
		if len(match) == 0 {
			return pick{}, bad
		}
		p.matches = append(p.matches, match)
	}
	xs, _ := v[5].([]any)
	for _, e := range xs {
		s, _ := e.(string)
		if _, ok := idOfEntry(s); !ok {
			return pick{}, bad
		}
		p.expiries = append(p.expiries, s)
	}
	if len(p.matches) > 0 && p.first <= 0 {
		return pick{}, bad
	}
	return p, nil
}

// form runs match_form.lua with the lock's fence for the chosen matches
// and expiries, then announces what it formed and expired.
func (h *holder) form(ctx context.Context, q Queue, cutoff int64, p pick) error {
	k := h.svc.keys(h.queue)
	fence := h.l.Fence()
	now := h.svc.now()
	_, fenceKey := h.m.cfg.Locks.Keys(lockName(h.queue))
	ks := []string{fenceKey, k.pool(), k.age(), k.users(), k.outbox()}
	args := []any{fence, ms(now), h.svc.statusTTL.Milliseconds(), h.svc.keep(q).Milliseconds(),
		q.MinSize, q.MaxSize, cutoff, len(p.matches)}
	for i, match := range p.matches {
		seq := p.first + int64(i)
		ks = append(ks, k.match(seq))
		args = append(args, seq, len(match))
		for _, e := range match {
			id, _ := idOfEntry(e)
			ks = append(ks, k.ticket(id))
			args = append(args, e)
		}
	}
	args = append(args, len(p.expiries))
	for _, e := range p.expiries {
		id, _ := idOfEntry(e)
		ks = append(ks, k.ticket(id))
		args = append(args, e)
	}
	v, err := redisx.Run(ctx, h.svc.rdb, matchFormScript, ks, args...).Result()
	if err != nil {
		return fmt.Errorf("form: %w", err)
	}
	if n, ok := v.(int64); ok && n == -1 {
		return fmt.Errorf("form %d matches in %s with fence %d: %w", len(p.matches), h.queue, fence, lock.ErrFenceStale)
	}
	res, _ := v.([]any)
	if len(res) != 2 {
		return fmt.Errorf("form: %w", errUnexpectedReply)
	}
	formed, _ := res[0].([]any)
	expired, _ := res[1].([]any)
	if len(formed) != len(p.matches) || len(expired) != len(p.expiries) {
		return fmt.Errorf("form: %w", errUnexpectedReply)
	}
	created := strconv.FormatInt(ms(now), 10)
	for i, f := range formed {
		r, _ := f.([]any)
		if len(r) != 3 || r[0] != int64(1) {
			continue // a ticket had gone: nothing of this match was written
		}
		attrs, _ := r[1].(string)
		players, _ := r[2].(string)
		seq := p.first + int64(i)
		m, err := matchOf(h.queue, map[string]string{"seq": strconv.FormatInt(seq, 10), "created": created,
			"fence": strconv.FormatInt(fence, 10), "attrs": attrs, "players": players})
		if err != nil {
			return fmt.Errorf("form: %w", err)
		}
		h.svc.m.matches.WithLabelValues(h.queue).Inc()
		h.svc.m.tickets.WithLabelValues(h.queue, "matched").Add(float64(len(m.Tickets)))
		for _, t := range m.Tickets {
			h.svc.m.wait.WithLabelValues(h.queue).Observe(max(0, m.Created.Sub(t.Created).Seconds()))
		}
		if err := h.announceMatch(ctx, "m:"+strconv.FormatInt(seq, 10), m); err != nil {
			return err
		}
	}
	for i, x := range expired {
		fields, _ := x.([]any)
		if len(fields) == 0 {
			continue
		}
		id, _ := idOfEntry(p.expiries[i])
		t, err := ticketOf(h.queue, id, pairsOf(fields))
		if err != nil {
			return fmt.Errorf("form: %w", err)
		}
		h.svc.m.tickets.WithLabelValues(h.queue, "expired").Inc()
		if err := h.announceExpired(ctx, "x:"+id, t); err != nil {
			return err
		}
	}
	return nil
}

// leftovers reports whether the outbox holds entries this holder should
// announce now: some it has not seen (left by a holder that died, or
// formed by a reply that was lost), or some whose retry is due.
func (h *holder) leftovers(n int64) bool {
	if n > int64(len(h.retry)) {
		return true
	}
	now := time.Now()
	for _, r := range h.retry {
		if !now.Before(r.next) {
			return true
		}
	}
	return false
}

// drain announces the outbox's entries: the records are read back from
// Redis (the formation wrote them with the entries), so nothing formed is
// lost between a formation and its hook, whoever formed it.
func (h *holder) drain(ctx context.Context) error {
	k := h.svc.keys(h.queue)
	members, err := h.svc.rdb.ZRange(ctx, k.outbox(), 0, drainBatch-1).Result()
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	now := time.Now()
	var todo []string
	for _, mb := range members {
		if r, ok := h.retry[mb]; ok && now.Before(r.next) {
			continue
		}
		todo = append(todo, mb)
	}
	if len(todo) == 0 {
		return nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(todo))
	_, err = h.svc.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, mb := range todo {
			kind, id, _ := strings.Cut(mb, ":")
			key := k.ticket(id)
			if kind == "m" {
				seq, _ := strconv.ParseInt(id, 10, 64)
				key = k.match(seq)
			}
			cmds[i] = p.HGetAll(ctx, key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	for i, mb := range todo {
		kind, id, _ := strings.Cut(mb, ":")
		rec := cmds[i].Val()
		hook := "matched"
		if kind != "m" {
			hook = "expired"
		}
		if len(rec) == 0 || (kind == "x" && rec["state"] != string(Expired)) {
			// Its record expired before any holder announced it (no
			// matcher ran for the status TTL): say so, and forget it.
			h.svc.log.Error("matchmaking: an announcement's record is gone", "queue", h.queue, "entry", mb)
			h.svc.m.announce.WithLabelValues(h.queue, hook, "dropped").Inc()
			h.ack(mb)
			continue
		}
		if kind == "m" {
			m, err := matchOf(h.queue, rec)
			if err != nil {
				h.undecodable(mb, hook, err)
				continue
			}
			if err := h.announceMatch(ctx, mb, m); err != nil {
				return err
			}
			continue
		}
		t, err := ticketOf(h.queue, id, rec)
		if err != nil {
			h.undecodable(mb, hook, err)
			continue
		}
		if err := h.announceExpired(ctx, mb, t); err != nil {
			return err
		}
	}
	return nil
}

// undecodable drops an outbox entry whose record cannot be read (written
// by another version, or by hand): retrying it would block the entries
// behind it.
func (h *holder) undecodable(member, hook string, err error) {
	h.svc.log.Error("matchmaking: an announcement's record does not decode; dropped", "queue", h.queue, "entry", member, "err", err)
	h.svc.m.announce.WithLabelValues(h.queue, hook, "dropped").Inc()
	h.ack(member)
}

func (h *holder) announceMatch(ctx context.Context, member string, m Match) error {
	var err error
	if h.m.cfg.OnMatched != nil {
		if err = h.keepAlive(ctx); err != nil {
			return err
		}
		err = h.m.cfg.OnMatched(ctx, m)
	}
	h.announced(member, "matched", err)
	return nil
}

func (h *holder) announceExpired(ctx context.Context, member string, t Ticket) error {
	var err error
	if h.m.cfg.OnExpired != nil {
		if err = h.keepAlive(ctx); err != nil {
			return err
		}
		err = h.m.cfg.OnExpired(ctx, t)
	}
	h.announced(member, "expired", err)
	return nil
}

// announced records a hook's result: acknowledged, or retried later with
// backoff (1 s, doubling up to 30 s) until its record expires.
func (h *holder) announced(member, hook string, err error) {
	if err == nil {
		h.svc.m.announce.WithLabelValues(h.queue, hook, "ok").Inc()
		h.ack(member)
		return
	}
	h.svc.m.announce.WithLabelValues(h.queue, hook, "failed").Inc()
	r := h.retry[member]
	r.backoff = min(max(2*r.backoff, time.Second), 30*time.Second)
	r.next = time.Now().Add(r.backoff)
	h.retry[member] = r
	h.svc.log.Warn("matchmaking: hook failed; retrying", "queue", h.queue, "hook", hook, "entry", member, "in", r.backoff, "err", err)
}

func (h *holder) ack(member string) {
	delete(h.retry, member)
	h.acks = append(h.acks, member)
}

// handOver acknowledges what this holder announced and releases the lock,
// so that the next holder starts at once and announces nothing twice.
func (h *holder) handOver(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if len(h.acks) > 0 {
		if err := h.svc.rdb.ZRem(ctx, h.svc.keys(h.queue).outbox(), toAny(h.acks)...).Err(); err != nil {
			h.svc.log.Warn("matchmaking: acknowledging announcements failed", "queue", h.queue, "err", err)
		}
		h.acks = nil
	}
	_ = h.l.Release(ctx) // a lock lost meanwhile is what the fence is for
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// checkPending hands the queue's pending parties to OnPending. A failing
// hook is logged, not retried: the next check comes PendingEvery later.
func (h *holder) checkPending(ctx context.Context) error {
	sts, err := h.svc.pendingParties(ctx, h.queue, h.m.cfg.MaxPending)
	if err != nil || len(sts) == 0 {
		return err
	}
	if err := h.keepAlive(ctx); err != nil {
		return err
	}
	if err := h.m.cfg.OnPending(ctx, sts); err != nil && ctx.Err() == nil {
		h.svc.log.Warn("matchmaking: the pending parties' check failed", "queue", h.queue, "err", err)
	}
	return nil
}
