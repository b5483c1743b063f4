package identity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// The types of Event.
const (
	// EventSignedOut: Holder signed out of User (Release); it is revoked
	// until Until.
	EventSignedOut = "signed_out"
	// EventClaimed: Holder claimed User while it was free (Claim, or
	// Admit or a restore taking it back); every other holder of User has
	// lost it.
	EventClaimed = "claimed"
)

// Event is one change of a name's holder, as published on Channel (JSON),
// by the same script that made it:
//
//	{"type":"signed_out","user":"misc1","holder":"9f2c…","until":"2026-12-01T12:00:00Z"}
//	{"type":"claimed","user":"misc1","holder":"77ab…"}
//
// User is the canonical name (names.Canonical).
type Event struct {
	Type   string    `json:"type"`
	User   string    `json:"user"`
	Holder string    `json:"holder"`
	Until  time.Time `json:"until,omitzero"` // signed_out only: the token's expiry
}

// encodeEvent is e's JSON, as the scripts publish it.
func encodeEvent(e Event) string {
	b, _ := json.Marshal(e) // strings and a time: cannot fail
	return string(b)
}

// DecodeEvent decodes an Event published on Channel. It returns
// ErrBadEvent for anything else: not JSON, an unknown type, a user name
// that is not valid or not canonical, a bad holder id.
func DecodeEvent(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	switch e.Type {
	case EventSignedOut, EventClaimed:
	default:
		return Event{}, fmt.Errorf("%w: type %q", ErrBadEvent, e.Type)
	}
	if err := names.User(e.User); err != nil || names.Canonical(e.User) != e.User {
		return Event{}, fmt.Errorf("%w: user %q is not a canonical name", ErrBadEvent, e.User)
	}
	if err := checkHolder(e.Holder); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	return e, nil
}

// Channel returns the channel every sign-out and fresh claim is published
// on (one for all nodes and users).
func (r *Registry) Channel() string { return eventsChannel(r.space) }

// Subscriber is the part of the node's bus a Registry needs: Subscribe,
// and Ready, which says whether the bus is receiving (its canary came
// back recently), so that the Admit cache is used only while events flow.
type Subscriber interface {
	// Subscribe returns once Redis confirmed the subscription.
	Subscribe(ctx context.Context, channel string, h bus.Handler) (*bus.Subscription, error)
	// Ready reports whether the bus is subscribed and receiving now.
	Ready() bool
}

var _ Subscriber = (*bus.Bus)(nil)

// Start subscribes to the registry's channel through sub and starts the
// Registry's goroutine, which calls Config.OnEnded and, after every
// resubscription of the bus, writes back to Redis the revocations this
// node remembers and the claims it saw held (see the package doc). It
// returns once subscribed; the goroutine runs until Close. It returns
// ctx's error or the bus's, or ErrStarted when called twice.
func (r *Registry) Start(ctx context.Context, sub Subscriber) error {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return ErrStarted
	}
	r.started = true
	r.mu.Unlock()
	h := bus.HandlerFuncs{OnReceive: r.receive, OnResubscribed: r.resubscribed}
	subn, err := sub.Subscribe(ctx, r.Channel(), h)
	if err != nil {
		return fmt.Errorf("identity: start: subscribe: %w", err)
	}
	// The goroutine outlives Start's ctx: it ends with Close.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.sub, r.subn, r.stop = sub, subn, cancel
	r.mu.Unlock()
	r.done.Add(1)
	go r.run(bg)
	return nil
}

// Close unsubscribes, stops the Registry's goroutine and waits for it
// (OnEnded calls not made yet are dropped). The Registry keeps working,
// asking Redis on every Admit. It returns the unsubscribe error.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	subn, stop := r.subn, r.stop
	r.sub, r.subn, r.stop = nil, nil, nil
	r.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	r.done.Wait()
	if err := subn.Close(ctx); err != nil {
		return fmt.Errorf("identity: close: %w", err)
	}
	return nil
}

// liveLocked reports whether events reach this Registry now: started and
// the bus Ready. r.mu is held.
func (r *Registry) liveLocked() bool { return r.sub != nil && r.sub.Ready() }

// receive handles one event (the bus's goroutine: it must not block).
func (r *Registry) receive(_ string, payload []byte) {
	e, err := DecodeEvent(payload)
	if err != nil {
		r.m.events.WithLabelValues("malformed").Inc()
		r.log.Warn("identity: malformed event", "err", err)
		return
	}
	r.m.events.WithLabelValues(e.Type).Inc()
	now := r.now()
	r.mu.Lock()
	r.mem.gen++
	var ended []claimant
	evicted := 0
	switch e.Type {
	case EventSignedOut:
		c := claimant{e.User, e.Holder}
		evicted = r.mem.revoke(c, e.Until, now)
		ended = []claimant{c}
	case EventClaimed:
		ended = r.mem.dropOthers(e.User, e.Holder)
	}
	r.queueEndedLocked(ended)
	r.mu.Unlock()
	r.m.evictions.WithLabelValues("revocations").Add(float64(evicted))
}

// resubscribed handles a resubscription of the channel (the bus's
// goroutine): events may have been missed, so nothing cached is trusted
// any more, and the Redis behind may be a new, empty one.
func (r *Registry) resubscribed() {
	r.m.events.WithLabelValues("resubscribed").Inc()
	r.mu.Lock()
	r.mem.epoch++
	r.mem.gen++
	r.mu.Unlock()
	select {
	case r.again <- struct{}{}:
	default:
	}
}

// queueEndedLocked queues OnEnded calls for cs. r.mu is held.
func (r *Registry) queueEndedLocked(cs []claimant) {
	if r.onEnded == nil || len(cs) == 0 {
		return
	}
	r.ended = append(r.ended, cs...)
	select {
	case r.endedC <- struct{}{}:
	default:
	}
}

// run calls OnEnded and runs the re-writes asked for by resubscriptions,
// retrying a failed one with backoff, until ctx ends.
func (r *Registry) run(ctx context.Context) {
	defer r.done.Done()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.endedC:
			r.callEnded()
			continue
		case <-r.again:
			retry.Stop()
		case <-retry.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := r.restore(rctx)
		cancel()
		r.callEnded()
		if err == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("identity: writing back claims and revocations failed; retrying", "err", err, "in", backoff)
		retry.Reset(backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// callEnded makes the queued OnEnded calls.
func (r *Registry) callEnded() {
	r.mu.Lock()
	cs := r.ended
	r.ended = nil
	r.mu.Unlock()
	for _, c := range cs {
		r.onEnded(c.user, c.holder)
	}
}

// restoreBatch is how many scripts one pipeline of restore carries.
const restoreBatch = 512

// restore writes back what this node remembers, after a resubscription: every
// revocation still in force (revoked_add.lua, idempotent), then every
// claim it saw held that may still be live, for what it has left
// (claim_restore.lua: only if the name is free, or extending the holder's
// own claim; a name found taken or a holder found revoked ends that
// holder's session here: OnEnded). Pipelines of restoreBatch scripts, all
// revocations before the claims. It returns the first Redis error.
func (r *Registry) restore(ctx context.Context) error {
	now, ttl := r.now(), r.TTL()
	r.mu.Lock()
	revs := r.mem.toRevoke(now)
	claims := r.mem.toRestore(now, ttl)
	r.mu.Unlock()
	for len(revs) > 0 {
		batch := revs[:min(len(revs), restoreBatch)]
		revs = revs[len(batch):]
		cmds := make([]*redis.Cmd, len(batch))
		err := redisx.Pipelined(ctx, r.rdb, func(p *redisx.Pipe) {
			for i, v := range batch {
				cmds[i] = p.Script(revokeScript, []string{revokedKey(r.space, v.user)}, v.holder, v.until.UnixMilli(), now.UnixMilli())
			}
		})
		for _, c := range cmds {
			if c.Err() == nil {
				r.m.calls.WithLabelValues("revoke", "revoked").Inc()
			}
		}
		if err != nil {
			r.m.calls.WithLabelValues("revoke", "error").Inc()
			return fmt.Errorf("identity: write back %d revocations: %w", len(batch), err)
		}
	}
	for len(claims) > 0 {
		batch := claims[:min(len(claims), restoreBatch)]
		claims = claims[len(batch):]
		cmds := make([]*redis.Cmd, len(batch))
		err := redisx.Pipelined(ctx, r.rdb, func(p *redisx.Pipe) {
			for i, v := range batch {
				cmds[i] = p.Script(restoreScript, r.keys(v.user), v.holder, v.left.Milliseconds(), now.UnixMilli(),
					r.Channel(), encodeEvent(Event{Type: EventClaimed, User: v.user, Holder: v.holder}))
			}
		})
		var ended []claimant
		for i, c := range cmds {
			res, cerr := c.Int64()
			if cerr != nil {
				continue
			}
			switch res {
			case 1:
				r.m.calls.WithLabelValues("restore", "restored").Inc()
			case 2:
				r.m.calls.WithLabelValues("restore", "kept").Inc()
			default: // 0: taken by another holder; -1: revoked
				r.m.calls.WithLabelValues("restore", "lost").Inc()
				ended = append(ended, batch[i].claimant)
			}
		}
		r.mu.Lock()
		for _, c := range ended {
			r.mem.drop(c)
		}
		r.queueEndedLocked(ended)
		r.mu.Unlock()
		if err != nil {
			r.m.calls.WithLabelValues("restore", "error").Inc()
			return fmt.Errorf("identity: write back %d claims: %w", len(batch), err)
		}
	}
	return nil
}
