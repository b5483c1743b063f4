package presence

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
)

// Node is one chatd node in the registry, as its last heartbeat described
// it. The figures after LastHeartbeat are the node's own report of itself
// (for the admin console); zero when the node did not give them.
type Node struct {
	ID            string    `json:"id"`
	Addr          string    `json:"addr"`
	Connections   int       `json:"connections"`
	LastHeartbeat time.Time `json:"last_heartbeat"`

	// Version is the node's build version.
	Version string `json:"version,omitempty"`
	// StartedAt is when the node's process started.
	StartedAt time.Time `json:"started_at,omitzero"`
	// CPU is the process's CPU use over the last heartbeat interval, in
	// cores (1.0 = one core busy).
	CPU float64 `json:"cpu,omitempty"`
	// MemoryBytes is the memory the Go runtime holds from the OS (mapped,
	// not released): close to the process's resident size.
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	// HeapBytes is the live and not yet swept heap.
	HeapBytes uint64 `json:"heap_bytes,omitempty"`
	// Goroutines is the number of goroutines.
	Goroutines int `json:"goroutines,omitempty"`
	// Run identifies the node's process: the claims it wrote with
	// Config.Run live while a beat carries the same run.
	Run string `json:"run,omitempty"`
	// Features are what the node's version does that an older one does
	// not understand (rooms.FeatureClaimRecords): the others rely on one
	// only while every live node lists it, so that nodes of two versions
	// work side by side during a rolling upgrade. Nodes of v0.1.0 list
	// none.
	Features []string `json:"features,omitempty"`
}

// Beat is what a Heartbeat learned.
type Beat struct {
	// Fresh is true when the node's run was not registered live before
	// this beat: its first beat, a beat after a lapse (the node stalled
	// for a TTL), or a registry Redis lost. Its users' claims may be gone
	// or dead: Touch them all again.
	Fresh bool
	// Runs are the runs of the live nodes, this one included (for caps
	// counted per run, see package identity's Conns).
	Runs []string
	// Shared are the node's Features that every live node lists, this one
	// included: the ones it may rely on now (see Node.Features). The beat
	// reads them with the registry it writes, so following them costs no
	// round trip of its own.
	Shared []string
}

// Heartbeat registers n as alive for TTL, with LastHeartbeat set to now
// (n.LastHeartbeat is ignored), and n.Run as the process beating for it. A
// node calls it every TTL/3; one that stops drops out of Nodes after TTL,
// and the claims its run wrote stop counting. It drops the dead nodes from
// the registry, as Nodes does. One script, one round trip. It returns an
// error wrapping ErrBadNode for a bad id.
func (p *Presence) Heartbeat(ctx context.Context, n Node) (Beat, error) {
	if err := checkNode(n.ID); err != nil {
		return Beat{}, fmt.Errorf("presence: heartbeat: %w", err)
	}
	now := p.now()
	n.LastHeartbeat = now.UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(n)
	if err != nil {
		return Beat{}, fmt.Errorf("presence: heartbeat %s: %w", n.ID, err)
	}
	// The beat's id tells the script a retry of this very call (go-redis
	// sends it again when its answer is late) from the next beat.
	args := []any{n.ID, ms(now.Add(p.ttl)), p.ttl.Milliseconds(), string(b), ms(now), n.Run, redisx.CallID()}
	for _, f := range n.Features {
		args = append(args, f)
	}
	res, err := heartbeatScript.Run(ctx, p.rdb, []string{p.k.nodeBeats(), p.k.nodeInfo(), p.k.nodeRuns()}, args...).Slice()
	if err != nil {
		return Beat{}, fmt.Errorf("presence: heartbeat %s: %w", n.ID, err)
	}
	var beat Beat
	if len(res) == 3 {
		beat.Fresh = res[0] == int64(1)
		beat.Runs = replyStrings(res[1])
		beat.Shared = replyStrings(res[2])
	}
	return beat, nil
}

// replyStrings are the strings of a script's array reply v.
func replyStrings(v any) []string {
	a, _ := v.([]any)
	var out []string
	for _, x := range a {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// Nodes returns the live nodes, by id, and drops the dead ones from the
// registry: one round trip.
func (p *Presence) Nodes(ctx context.Context) ([]Node, error) {
	raw, err := nodesScript.Run(ctx, p.rdb, []string{p.k.nodeBeats(), p.k.nodeInfo(), p.k.nodeRuns()}, ms(p.now())).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("presence: nodes: %w", err)
	}
	out := make([]Node, 0, len(raw))
	for _, s := range raw {
		var n Node
		if err := json.Unmarshal([]byte(s), &n); err != nil {
			return nil, fmt.Errorf("presence: nodes: bad entry %q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// Leave removes node id from the registry at once (a clean shutdown). It
// returns an error wrapping ErrBadNode for a bad id.
func (p *Presence) Leave(ctx context.Context, id string) error {
	if err := checkNode(id); err != nil {
		return fmt.Errorf("presence: leave: %w", err)
	}
	_, err := p.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZRem(ctx, p.k.nodeBeats(), id)
		pipe.HDel(ctx, p.k.nodeInfo(), id)
		pipe.HDel(ctx, p.k.nodeRuns(), id, id+" fresh")
		return nil
	})
	if err != nil {
		return fmt.Errorf("presence: leave %s: %w", id, err)
	}
	return nil
}
