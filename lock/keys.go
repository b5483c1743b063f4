package lock

import (
	"fmt"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// A lock name is a hash-tag unit "kind:id"; both of its keys live in that
// unit's slot, with any other key a caller protects with the lock.

// lockKey holds the owner's token while the lock is held.
func lockKey(s keyspace.Space, kind, id string) string { return s.Key(kind, id, "lock") } // STRING token, PX ttl

// fenceKey counts the fences issued; it has no TTL, so it only grows.
func fenceKey(s keyspace.Space, kind, id string) string { return s.Key(kind, id, "fence") } // STRING INCR counter

// Limits of a lock name "kind:id".
const (
	maxKind = 32  // kind: 1–32 of [A-Za-z0-9_-]
	maxID   = 128 // id: 1–128 of [A-Za-z0-9_.@:-]
)

// splitName splits a lock name "kind:id" at its first colon. ok is false
// when there is no colon.
func splitName(name string) (kind, id string, ok bool) {
	for i := 0; i < len(name); i++ {
		if name[i] == ':' {
			return name[:i], name[i+1:], true
		}
	}
	return name, "", false
}

// checkName validates a lock name: "kind:id" with kind 1–32 of
// [A-Za-z0-9_-] and id 1–128 of [A-Za-z0-9_.@:-]. No brace can reach a key,
// so the name is exactly the key's hash tag.
func checkName(name string) (kind, id string, err error) {
	kind, id, ok := splitName(name)
	if !ok || kind == "" || id == "" || len(kind) > maxKind || len(id) > maxID {
		return "", "", fmt.Errorf("%w: lock name %q must be kind:id (kind 1-%d, id 1-%d characters)", names.ErrBadName, clip(name), maxKind, maxID)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		case i > len(kind) && (c == '.' || c == '@' || c == ':'):
		case i == len(kind): // the separating colon
		default:
			return "", "", fmt.Errorf("%w: lock name %q may only hold A-Z a-z 0-9 _ - (and . @ : in the id)", names.ErrBadName, clip(name))
		}
	}
	return kind, id, nil
}

// hashTag returns what Redis Cluster hashes in key: the part between the
// first '{' and the next '}' when that is not empty, else "" (no tag).
func hashTag(key string) string {
	for i := 0; i < len(key); i++ {
		if key[i] == '{' {
			for j := i + 1; j < len(key); j++ {
				if key[j] == '}' {
					return key[i+1 : j]
				}
			}
			return ""
		}
	}
	return ""
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
