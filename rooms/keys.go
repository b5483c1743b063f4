package rooms

import (
	"strconv"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Everything of one lobby lives in the {lobby:L} hash-tag unit, so every
// seat, room and message script runs on one Redis Cluster slot. Only the
// sweep index, the lobby listing, the global counters and each user's
// index of lobbies live outside it, and no script of a lobby touches them.
//
// The seat data are lobby-wide keys, never one key per room: a seat script
// picks the room at run time, and a key it named then would not be in its
// KEYS (see doc.go, "every key in KEYS"). Room histories are per room; the
// scripts that touch one get it in KEYS from Go, which knows the room.

// Seats: the lobby's seat data, in its slot; every seat script (and the
// private room script, Private) gets all of them in KEYS, with the lobby
// lock's fence (lobbyKeys). Messages' send script reads members,
// leases, rooms and rest; ReadMarks reads rooms.

// membersKey maps each seated user of the lobby to their room number (a
// seat whose lease ran out stays until it is reaped); a room's members are
// ZRANGEBYSCORE n n, its count ZCOUNT n n.
func membersKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "members") } // ZSET user → room number

// leasesKey maps each seated user to the lease expiry of their seat (unix
// ms), the latest of its attachments'; its lowest score is the lobby's next
// expiry.
func leasesKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "leases") } // ZSET user → expiry ms

// attsKey maps each attachment of a seat, "<user> <attachment id>", to its
// lease expiry (unix ms).
func attsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "attachments") } // ZSET "user id" → expiry ms

// attIDsKey lists each seated user's attachment ids, space-separated, a
// REST attachment's id marked with a leading '+' (ids never hold '+' or a
// space).
func attIDsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "attids") } // HASH user → "id +id …"

// restKey holds the users held by a REST attachment, scored by their room
// number: a room has REST members when ZCOUNT n n > 0.
func restKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "rest") } // ZSET user → room number

// roomsKey lists every room of the lobby: room number → room number.
func roomsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "rooms") } // ZSET

// openKey holds the rooms that may have a free seat (a superset: a room with
// fewer seats than openCapKey's capacity is always in it), room number →
// room number, so the lowest comes first.
func openKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "open") } // ZSET

// openCapKey is the capacity openKey was last made complete for; a higher
// capacity puts every room back into openKey.
func openCapKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "opencap") } // STRING int

// seqKey is the last room number handed out.
func seqKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "seq") } // STRING INCR

// recordsKey holds each room's record: room number → JSON {id, lobby, seq,
// created (unix ms), fence}.
func recordsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "records") } // HASH

// verKey is the stamp of the lobby's last change of seated users or rooms
// (µs, strictly increasing), which orders its counts in the lobby index.
func verKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "ver") } // STRING int

// runsKey maps each run (a node's process) holding attachments bound to it
// in the lobby to the lease of those attachments (unix ms): one score per
// run, renewed once per tick, keeps them all (see doc.go, "attachments that
// live with their node's run").
func runsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "runs") } // ZSET run → expiry ms

// runAttsKey lists the attachments bound to each run, "<run> <user> <attachment
// id>", all scored 0 so that ZRANGEBYLEX finds a run's.
func runAttsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "runatts") } // ZSET "run user id" → 0

// Seats, outside the lobby's slot: the sweeper's index, the room counter
// (read by Messages.Counters) and the lobby lock.

// lobbiesKey maps every lobby that has rooms to the time (unix ms) the
// sweeper should next look at it, a lower bound of its earliest lease expiry.
func lobbiesKey(ks keyspace.Space) string { return ks.Global("rooms", "lobbies") } // ZSET

// roomsTotalKey counts rooms created, all lobbies.
func roomsTotalKey(ks keyspace.Space) string { return ks.Global("stats", "rooms") } // STRING INCR

// lockName is the lock.Client name guarding room creation in a lobby: its
// lock and fence keys share the lobby's hash tag.
func lockName(lobby string) string { return "lobby:" + lobby }

// seatCap (Seats' cap on a user's lobbies): the user's index, in the
// user's slot.

// userLobbiesKey lists the lobbies user may hold a seat in, for
// Config.MaxLobbiesPerUser: lobby → the time (unix ms) a join reserved it,
// or 0 once the join seated the user; the seat data, not this index, say
// which of them count. In the user's slot: the lobbies are in slots of
// their own.
func userLobbiesKey(ks keyspace.Space, user string) string {
	return ks.Key("user", names.Canonical(user), "lobbies")
} // ZSET lobby → ms

// Messages: each room's history (read by ReadMarks too, its TTL refreshed
// by Seats.Renew), the say buckets,
// the idempotency records and claims, the channels (the seat scripts
// publish presence on them too) and the global message counter.

// historyKey is a room's message history, capped near Config.HistoryMax; it
// expires Config.IdleTTL after the last send or renewal in the room.
func historyKey(ks keyspace.Space, lobby string, seq int) string {
	return ks.Key("lobby", lobby, "history", strconv.Itoa(seq)) // STREAM from, text, ts
}

// rateKey is user's say bucket in the lobby: "<tokens> <at unix ms>"; it
// expires when it would be full again. In the lobby's slot so that the send
// script can take a token atomically with the append. A STRING (one SET NX
// GET, and a SET PX when it was there) since it was a HASH under "rate"
// (HMGET, HSET, PEXPIRE): the new name keeps a node of either version from
// reading the other's type.
func rateKey(ks keyspace.Space, lobby, user string) string {
	return ks.Key("lobby", lobby, "sayrate", names.Canonical(user)) // STRING "<tokens> <at ms>"
}

// saidKey records the say that user made in the lobby with idempotency key
// key: "<call>/<i> <room number> <text hash> <stream id> <ts ms>"; it
// expires Config.IdempotencyTTL after the say. With claim records
// (Messages.SetClaimRecords) a keyed say's record is in its claim instead;
// a say without a key is always recorded here, under "~<call>/<i>".
func saidKey(ks keyspace.Space, lobby, user, key string) string {
	return ks.Key("lobby", lobby, "said", names.Canonical(user), key) // STRING
}

// leftKey records what one Leave call's script answered ("1" freed, "0"
// not seated, "-1" no such room), for redisx.CallRecordTTL: go-redis's
// retry of the call (a late reply; the first copy may have run) is
// answered that, instead of freeing a seat the user took again between
// the copies. call is the Leave's random id (redisx.CallID).
func leftKey(ks keyspace.Space, lobby, call string) string {
	return ks.Key("lobby", lobby, "left", call) // STRING, PX redisx.CallRecordTTL
}

// removedKey records what one Remove call's script answered, for
// redisx.CallRecordTTL, as leftKey does for a Leave.
func removedKey(ks keyspace.Space, lobby, call string) string {
	return ks.Key("lobby", lobby, "removed", call) // STRING, PX redisx.CallRecordTTL
}

// claimKey binds user's idempotency key key to one message across every
// lobby: "<room> <text hash>", followed by the say's record ("<call>/<i>
// <stream id> <ts ms>") once it is stored, with claim records
// (Messages.SetClaimRecords); it expires with the send record (saidKey).
// In the user's slot: on a Cluster SendMany claims it alone, with SET NX
// GET, and it holds no record.
func claimKey(ks keyspace.Space, user, key string) string {
	return ks.Key("user", names.Canonical(user), "said", key) // STRING
}

// channelPrefix is the prefix of channel, passed in ARGV to scripts that
// publish on a room chosen at run time (a channel is not a key).
func channelPrefix(ks keyspace.Space, lobby string) string {
	return ks.Key("lobby", lobby, "events") + ":" // channel prefix
}

// channel is a room's pub/sub channel: JSON events, see Event.
func channel(ks keyspace.Space, lobby string, seq int) string {
	return channelPrefix(ks, lobby) + strconv.Itoa(seq) // CHANNEL
}

// messagesTotalKey counts messages sent, all rooms of all lobbies.
func messagesTotalKey(ks keyspace.Space) string { return ks.Global("stats", "messages") } // STRING INCR

// countedKey marks that the send call call has added its messages to
// messagesTotalKey, so that a pipeline Redis runs twice (a client retry)
// counts once. It lives in messagesTotalKey's slot: that name has no hash
// tag, so Cluster hashes all of it, and a tag holding the whole name hashes
// the same (with a tag in the prefix, both hash that one).
func countedKey(ks keyspace.Space, call string) string {
	return tokenKey(messagesTotalKey(ks), call)
}

// claimsSinceKey is claims_since.lua's mark: since when (unix ms) no node
// has written a keyed say's record without its claim (Messages.
// FollowClaimRecords). In messagesTotalKey's slot, which the script reads.
func claimsSinceKey(ks keyspace.Space) string {
	total := messagesTotalKey(ks)
	return total + ":claims-since:{" + total + "}" // STRING, no TTL
}

// roomsCountedKey marks that the room creation call call has added its
// rooms to roomsTotalKey, as countedKey does for messages.
func roomsCountedKey(ks keyspace.Space, call string) string {
	return tokenKey(roomsTotalKey(ks), call)
}

// tokenKey is counter_add.lua's token of call for the counter total, in
// total's slot.
func tokenKey(total, call string) string {
	return total + ":counted:{" + total + "}:" + call // STRING, PX countedTTL
}

// ReadMarks: each user's last-read ids in the lobby, in its slot.

// readKey holds user's last-read message id (padded) in each room of the
// lobby, room number → id; it expires Config.IdleTTL after the last MarkRead.
func readKey(ks keyspace.Space, lobby, user string) string {
	return ks.Key("lobby", lobby, "read", names.Canonical(user)) // HASH
}

// Lobbies: the lobby index lives in one slot of its own, {rooms:index}:
// onlineKey, onlineInfoKey and onlineGoneKey are written together by
// lobbies_count.lua.

// onlineKey scores each lobby with seated users by minus their number, so
// that ZRANGE lists the most seated first and ties by name.
func onlineKey(ks keyspace.Space) string { return ks.Key("rooms", "index", "online") } // ZSET

// onlineInfoKey holds, for each lobby in onlineKey, "<stamp> <rooms>": the
// stamp of the count indexed and the lobby's number of rooms.
func onlineInfoKey(ks keyspace.Space) string { return ks.Key("rooms", "index", "info") } // HASH

// onlineGoneKey maps each lobby recently indexed with no seat to the stamp
// of that count (a tombstone, trimmed after lobbyTombstone), so that an
// older count arriving late cannot bring it back.
func onlineGoneKey(ks keyspace.Space) string { return ks.Key("rooms", "index", "gone") } // ZSET
