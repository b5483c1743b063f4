package presence

import (
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// keys builds every key of the package. A user's presence is one key in the
// {user:U} slot; the node registry in the {nodes:registry} slot; the global
// online index in a slot of its own.
type keys struct {
	ks keyspace.Space
}

// user: per node N that holds the user "node:N" (its expiry, unix ms),
// "run:N" (the run that wrote the claim, which keeps it past its expiry
// while that run's node beats; absent without Config.Run),
// "rooms:N" (JSON array) and "conns:N" (JSON array of Conn); and
// "last_seen" (unix ms).
func (k keys) user(user string) string { return k.ks.Key("user", names.Canonical(user), "presence") } // HASH

// online: user → expiry (unix ms) of every online user, for the global count.
func (k keys) online() string { return k.ks.Global("presence", "online") } // ZSET

// nodeBeats: node id → expiry (unix ms) of every registered node.
func (k keys) nodeBeats() string { return k.ks.Key("nodes", "registry", "beats") } // ZSET

// nodeInfo: node id → JSON Node of every registered node.
func (k keys) nodeInfo() string { return k.ks.Key("nodes", "registry", "info") } // HASH

// nodeRuns: node id → run id of the process beating for it; "<id> fresh" →
// the id of its last fresh beat (node_heartbeat.lua).
func (k keys) nodeRuns() string { return k.ks.Key("nodes", "registry", "runs") } // HASH
