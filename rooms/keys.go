package rooms

import (
	"strconv"

	"github.com/chatd/chatd/internal/keyspace"
)

// Everything of one lobby lives in the {lobby:L} hash-tag unit, so every
// seat, room and message script runs on one Redis Cluster slot. Only the
// sweep index and the global counters live outside it, and no script touches
// them.

// roomsKey lists every room of the lobby: room number → room number.
func roomsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "rooms") } // ZSET

// openKey holds the rooms that may have a free seat (a superset: a room with
// fewer live seats than openCapKey's capacity is always in it), room number →
// room number, so the lowest comes first.
func openKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "open") } // ZSET

// openCapKey is the capacity openKey was last made complete for; a higher
// capacity puts every room back into openKey.
func openCapKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "opencap") } // STRING int

// dueKey maps a room number to a lower bound of its earliest seat-lease
// expiry (unix ms): a room scored at or before now may hold expired seats.
func dueKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "due") } // ZSET

// usersKey maps each seated user of the lobby to their room number.
func usersKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "users") } // HASH

// seqKey is the last room number handed out.
func seqKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "seq") } // STRING INCR

// seatsPrefix is the prefix of seatsKey, passed in KEYS to scripts that
// choose a room at run time and append its number.
func seatsPrefix(ks keyspace.Space, lobby string) string {
	return ks.Key("lobby", lobby, "seats") + ":" // key prefix
}

// seatsKey holds a room's seats: user → lease expiry (unix ms).
func seatsKey(ks keyspace.Space, lobby string, seq int) string {
	return seatsPrefix(ks, lobby) + strconv.Itoa(seq) // ZSET
}

// recordPrefix is the prefix of recordKey, passed in KEYS to room_create.lua.
func recordPrefix(ks keyspace.Space, lobby string) string {
	return ks.Key("lobby", lobby, "room") + ":" // key prefix
}

// recordKey is a room's record: id, lobby, seq, created (unix ms), fence.
func recordKey(ks keyspace.Space, lobby string, seq int) string {
	return recordPrefix(ks, lobby) + strconv.Itoa(seq) // HASH
}

// historyPrefix is the prefix of historyKey, passed in KEYS to the seat
// scripts, which expire an idle lobby's histories.
func historyPrefix(ks keyspace.Space, lobby string) string {
	return ks.Key("lobby", lobby, "history") + ":" // key prefix
}

// historyKey is a room's message history, capped near Config.HistoryMax.
func historyKey(ks keyspace.Space, lobby string, seq int) string {
	return historyPrefix(ks, lobby) + strconv.Itoa(seq) // STREAM from, text, ts
}

// attsKey maps each seated user of the lobby to the attachments holding
// their seat: cjson {attachment id: [lease expiry ms, 1 if REST else 0]}.
func attsKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "atts") } // HASH

// restPrefix is the prefix of restKey, passed in KEYS to the seat scripts.
func restPrefix(ks keyspace.Space, lobby string) string {
	return ks.Key("lobby", lobby, "rest") + ":" // key prefix
}

// restKey holds the users of a room with a REST attachment, so a say knows
// in O(1) whether the room has REST members to mark.
func restKey(ks keyspace.Space, lobby string, seq int) string {
	return restPrefix(ks, lobby) + strconv.Itoa(seq) // SET
}

// rateKey is user's say bucket in the lobby: t (tokens), at (unix ms); it
// expires when it would be full again. In the lobby's slot so that the send
// script can take a token atomically with the append.
func rateKey(ks keyspace.Space, lobby, user string) string {
	return ks.Key("lobby", lobby, "rate", user) // HASH t, at
}

// channelPrefix is the prefix of channel, passed in ARGV to scripts that
// publish on a room chosen at run time.
func channelPrefix(ks keyspace.Space, lobby string) string {
	return ks.Key("lobby", lobby, "events") + ":" // key prefix
}

// channel is a room's pub/sub channel: JSON events, see Event.
func channel(ks keyspace.Space, lobby string, seq int) string {
	return channelPrefix(ks, lobby) + strconv.Itoa(seq) // CHANNEL
}

// verKey is the stamp of the lobby's last change of seated users or rooms
// (µs, strictly increasing), which orders its counts in the lobby index.
func verKey(ks keyspace.Space, lobby string) string { return ks.Key("lobby", lobby, "ver") } // STRING int

// readKey holds user's last-read message id (padded) in each room of the
// lobby, room number → id; it expires Config.IdleTTL after the last MarkRead.
func readKey(ks keyspace.Space, lobby, user string) string {
	return ks.Key("lobby", lobby, "read", user) // HASH
}

// The lobby index (Lobbies) lives in one slot of its own, {rooms:index}:
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

// lobbiesKey maps every lobby that has rooms to the time (unix ms) the
// sweeper should next look at it, a lower bound of its earliest lease expiry.
func lobbiesKey(ks keyspace.Space) string { return ks.Global("rooms", "lobbies") } // ZSET

// messagesTotalKey counts messages sent, all rooms of all lobbies.
func messagesTotalKey(ks keyspace.Space) string { return ks.Global("stats", "messages") } // STRING INCR

// roomsTotalKey counts rooms created, all lobbies.
func roomsTotalKey(ks keyspace.Space) string { return ks.Global("stats", "rooms") } // STRING INCR

// lockName is the lock.Client name guarding room creation in a lobby: its
// lock and fence keys share the lobby's hash tag.
func lockName(lobby string) string { return "lobby:" + lobby }
