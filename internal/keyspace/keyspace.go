// Package keyspace builds every Redis key and channel name chatd uses.
//
// A key is the deployment prefix, a hash tag naming the unit of atomicity, and
// a suffix:
//
//	chatd:{lobby:general}:rooms
//	chatd:{user:alice}:seen:3
//
// Redis Cluster hashes only the part between the first '{' and the next '}'
// (the hash tag), so every key built for one unit lands in one slot and a Lua
// script or MULTI/EXEC may touch them together. Keys with no unit (global
// counters) use Global and live in a slot of their own.
//
// The naive alternative — building keys with fmt.Sprintf at each call site —
// fails quietly on a cluster: one missing tag and a script that ran fine on a
// single server answers CROSSSLOT in production.
package keyspace

import "strings"

// DefaultPrefix is the prefix used when none is configured.
const DefaultPrefix = "chatd"

// Space is a key namespace: every key it builds starts with its prefix.
// The zero value uses DefaultPrefix.
type Space struct {
	prefix string
}

// New returns the Space for prefix; an empty prefix means DefaultPrefix.
func New(prefix string) Space {
	return Space{prefix: prefix}
}

// Prefix returns the namespace prefix, without a trailing colon.
func (s Space) Prefix() string {
	if s.prefix == "" {
		return DefaultPrefix
	}
	return s.prefix
}

// Tag returns the hash tag of a unit: "{kind:id}".
func Tag(kind, id string) string {
	return "{" + kind + ":" + id + "}"
}

// Key returns prefix:{kind:id}:parts... — a key in the slot of unit kind:id.
// It is built in one allocation of its final size: a node builds several
// keys for every message it sends, and a builder that grows as it goes
// (and a tag made apart) allocated four to six times a key.
func (s Space) Key(kind, id string, parts ...string) string {
	prefix := s.Prefix()
	n := len(prefix) + len(kind) + len(id) + 4 // ":{" ":" "}"
	for _, p := range parts {
		n += 1 + len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(prefix)
	b.WriteString(":{")
	b.WriteString(kind)
	b.WriteByte(':')
	b.WriteString(id)
	b.WriteByte('}')
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// Global returns prefix:parts... — a key that belongs to no unit. Use it only
// for keys that no script or transaction touches together with another key.
func (s Space) Global(parts ...string) string {
	return s.Prefix() + ":" + strings.Join(parts, ":")
}

// Slot returns the Redis Cluster slot of key (CRC16/XMODEM of the hash tag,
// or of the whole key when it has none, modulo 16384), as the server computes it.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC16/XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
