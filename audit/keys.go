package audit

import "github.com/chatd/chatd/internal/keyspace"

// logKey is the audit log of actions (answered below 400): JSON Entry
// values, newest first.
func logKey(ks keyspace.Space) string { return ks.Global("admin", "audit") } // LIST, PX Config.TTL

// refusedKey is the audit log of refusals (answered 400 or more): JSON
// Entry values, newest first, capped apart from the actions.
func refusedKey(ks keyspace.Space) string { return ks.Global("admin", "audit", "refused") } // LIST, PX Config.TTL

// serverKey is the audit log of the server API's keys (Entry.Role
// RoleServer), actions and refusals: JSON Entry values, newest first,
// capped apart, so a busy backend pushes no admin entry out.
func serverKey(ks keyspace.Space) string { return ks.Global("admin", "audit", "server") } // LIST, PX Config.TTL
