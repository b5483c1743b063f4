package matchmaking

import (
	"strconv"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// keys builds every key of one queue. All of them carry the queue's hash
// tag {mm:QUEUE}, the unit of the queue's lock: a submission, a cancel and
// a match formation touch the pool, the age index, the user map, tickets,
// the match record and the outbox in one script, and the formation checks
// the lock's fence ({mm:QUEUE}:fence, kept by package lock) in the same
// script, so on Redis Cluster they must all share one slot.
type keys struct {
	ks    keyspace.Space
	queue string
}

// lockName is the name of the queue's lock in package lock: its two keys
// (lock, fence) are in the same {mm:QUEUE} unit as the keys below.
func lockName(queue string) string { return "mm:" + queue }

// pool holds every waiting ticket's entry with score 0, so that ZRANGEBYLEX
// orders them by attribute bucket, then skill (see entry).
func (k keys) pool() string { return k.ks.Key("mm", k.queue, "pool") } // ZSET entry -> 0

// age holds the same entries scored by enqueue time: oldest first, and the
// expiry scan.
func (k keys) age() string { return k.ks.Key("mm", k.queue, "age") } // ZSET entry -> created ms

// users maps every member of an open ticket (its user and party), by
// canonical name (names.Canonical: case variants are one person), to the
// ticket: the one-open-ticket rule.
func (k keys) users() string { return k.ks.Key("mm", k.queue, "users") } // HASH canonical user -> ticket id

// ticket is a ticket's body and state; it outlives the ticket's end by the
// status TTL, so that a poller learns how it ended.
func (k keys) ticket(id string) string { return k.ks.Key("mm", k.queue, "t", id) } // HASH state, entry, user, party, skill, attrs, created, ended, match

// match is a formed match's record, for the status TTL.
func (k keys) match(seq int64) string {
	return k.ks.Key("mm", k.queue, "m", strconv.FormatInt(seq, 10))
} // HASH seq, created, fence, attrs, players

// fresh lists the entries submitted since the matcher last took them, in
// submission order: each is tried once as a seed however many tickets
// wait before it (see doc.go, fair matching).
func (k keys) fresh() string { return k.ks.Key("mm", k.queue, "fresh") } // LIST entry, oldest first

// sweep is the pool entry the matcher's sweep seeded last: each round
// seeds the next entries of the pool after it, wrapping round.
func (k keys) sweep() string { return k.ks.Key("mm", k.queue, "sweep") } // STRING entry

// trouble says that the queue's matcher has been failing: written by the
// holder after failed rounds in a row, refreshed while they fail, deleted
// by the next round that succeeds; Status shows it on waiting tickets.
func (k keys) trouble() string { return k.ks.Key("mm", k.queue, "trouble") } // STRING since (unix ms), PX

// pending indexes the pending parties (tickets whose invitations are not
// all accepted yet) by their invitations' deadline: the holder expires
// those past it. A pending party is in no other index of the queue: not in
// the pool, the age index or the user map, so it queues and blocks nobody.
func (k keys) pending() string { return k.ks.Key("mm", k.queue, "pending") } // ZSET ticket id -> deadline ms

// seq counts match numbers: never reset, so a match id is never reused.
func (k keys) seq() string { return k.ks.Key("mm", k.queue, "seq") } // STRING INCR counter

// outbox holds the matches and expiries not yet handed to the hooks
// ("m:SEQ", "x:TICKET"), written by the formation script itself.
func (k keys) outbox() string { return k.ks.Key("mm", k.queue, "outbox") } // ZSET member -> ms written

// userEvents holds what user was told about their tickets (matched,
// expired), newest first, capped at MaxUserEvents; it expires the status
// TTL after the last event. In the user's unit: a user's tickets are in
// as many queues' units.
func userEvents(ks keyspace.Space, user string) string {
	return ks.Key("user", names.Canonical(user), "mm", "events")
} // LIST JSON Event

// eventsChannel carries every Notify to every node (PUBLISH): each node
// hands the events to its own connections of the users named.
func eventsChannel(ks keyspace.Space) string { return ks.Global("mm", "events") } // CHANNEL JSON []Notice
