package rooms

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Values of Config.Durability.
const (
	// DurabilityNone acks a message once its master stored it.
	DurabilityNone = "none"
	// DurabilityReplica acks a message once a replica holds it too (WAIT).
	DurabilityReplica = "replica"
)

// DefaultDurabilityTimeout is how long a send waits for a replica's
// acknowledgement when Config.DurabilityTimeout is 0.
const DefaultDurabilityTimeout = time.Second

func (s *Messages) durable() bool {
	return s.durability != nil && s.durability() == DurabilityReplica
}

// queueWaits appends WAIT 1 <timeout> to pipe behind the send scripts of
// chunks (each one script call's says), one per connection those scripts
// go out on, and points each prepared send at the WAIT that covers it.
//
// WAIT blocks until the replicas acknowledged every write made so far on
// its own connection, so it must follow the scripts on theirs. A single
// server or Sentinel pipeline is one connection: one WAIT at the end. A
// ClusterClient pipeline is one connection per master, chosen by each
// command's first key; WAIT has none, and go-redis would send it to any
// master. So on a Cluster each lobby (hash-tag unit, hence slot) of the
// commit gets a WAIT routed by the lobby's rooms key (slotWait).
func (s *Messages) queueWaits(ctx context.Context, pipe redis.Pipeliner, chunks [][]*prepared) {
	timeout := s.waitFor.Milliseconds()
	if !s.cluster {
		w := redis.NewIntCmd(ctx, "wait", 1, timeout)
		_ = pipe.Process(ctx, w)
		for _, c := range chunks {
			for _, p := range c {
				p.wait = w
			}
		}
		return
	}
	byLobby := map[string]*redis.IntCmd{}
	for _, c := range chunks {
		for _, p := range c {
			w, ok := byLobby[p.lobby]
			if !ok {
				key := roomsKey(s.ks, p.lobby)
				w = redis.NewIntCmd(ctx, "wait", 1, timeout, key)
				w.SetFirstKeyPos(3)
				_ = pipe.Process(ctx, slotWait{IntCmd: w, wire: []any{"wait", 1, timeout}})
				byLobby[p.lobby] = w
			}
			p.wait = w
		}
	}
}

// slotWait is a WAIT that a ClusterClient pipeline sends to the master of
// a key's slot. Its IntCmd carries the key as a fourth argument at the
// first-key position, which go-redis reads to pick the node; Args, which
// go-redis writes to the wire, leave the key out. The reply lands in the
// IntCmd. rooms' tests check on a Cluster that the WAIT reaches the room's
// master (INFO commandstats), so a go-redis that routes otherwise fails
// them.
type slotWait struct {
	*redis.IntCmd
	wire []any
}

// Args are the arguments written to Redis: WAIT numreplicas timeout.
func (w slotWait) Args() []any { return w.wire }

// replicated returns nil when p's WAIT saw a replica acknowledge it, else
// an error wrapping ErrNotReplicated.
func (s *Messages) replicated(p *prepared) error {
	if p.wait == nil {
		return fmt.Errorf("%w: no WAIT was sent", ErrNotReplicated)
	}
	n, err := p.wait.Result()
	switch {
	case err != nil:
		s.m.notReplicated.Inc()
		return fmt.Errorf("%w: WAIT: %v", ErrNotReplicated, err)
	case n < 1:
		s.m.notReplicated.Inc()
		return fmt.Errorf("%w: no replica acknowledged within %v", ErrNotReplicated, s.waitFor)
	}
	return nil
}
