package moderation

import "github.com/chatd/chatd/internal/keyspace"

// A user's mute and ban share the hash tag {mod:<user>}, so Check reads both
// with one MGET on one Cluster slot. The listing indexes share {mods:all},
// so one script trims and reads them all. The per-user keys are the
// sanctions themselves (their TTL lifts them); the indexes only list them.

// muteKey is user's mute while it lasts: JSON {"until": unix ms, "reason"},
// expiring when the mute ends.
func muteKey(ks keyspace.Space, user string) string { return ks.Key("mod", user, "mute") } // STRING

// banKey is user's ban while it lasts, as muteKey.
func banKey(ks keyspace.Space, user string) string { return ks.Key("mod", user, "ban") } // STRING

// indexKey lists the users under a sanction of kind ("mute" or "ban"):
// user → until (unix ms); entries past their until are trimmed by List.
func indexKey(ks keyspace.Space, kind string) string { return ks.Key("mods", "all", kind) } // ZSET

// reasonsKey holds the reason of each user in indexKey(kind).
func reasonsKey(ks keyspace.Space, kind string) string {
	return ks.Key("mods", "all", kind+"-reasons") // HASH user → reason
}

// eventsChannel carries every moderation action to every node: JSON Event.
func eventsChannel(ks keyspace.Space) string { return ks.Global("moderation", "events") } // CHANNEL
