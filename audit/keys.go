package audit

import "github.com/chatd/chatd/internal/keyspace"

// logKey is the audit log: JSON Entry values, newest first.
func logKey(ks keyspace.Space) string { return ks.Global("admin", "audit") } // LIST, PX Config.TTL
