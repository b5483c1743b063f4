package ratelimit

import (
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// keys builds the keys of this package from the configured prefix.
type keys struct {
	space keyspace.Space
}

// bucket is user's token bucket: STRING "<tokens> <at ms>" (bucket_lib.lua),
// with a TTL. (Before 2026-12-05 a HASH under "rate": the new name keeps a
// node of either version from reading the other's type.)
func (k keys) bucket(user string) string { return k.space.Key("user", names.Canonical(user), "bucket") } // STRING

// window is user's sliding-window log (Config.Window): ZSET of event ids
// scored by ms, with a TTL of the window.
func (k keys) window(user string) string { return k.space.Key("user", names.Canonical(user), "window") } // ZSET
