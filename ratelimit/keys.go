package ratelimit

import (
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// keys builds the keys of this package from the configured prefix.
type keys struct {
	space keyspace.Space
}

// bucket is user's token bucket: HASH {tokens: float, ts: ms}, with a TTL.
func (k keys) bucket(user string) string { return k.space.Key("user", names.Canonical(user), "rate") } // HASH

// window is user's sliding-window log (Config.Window): ZSET of event ids
// scored by ms, with a TTL of the window.
func (k keys) window(user string) string { return k.space.Key("user", names.Canonical(user), "window") } // ZSET
