package direct

import "github.com/chatd/chatd/internal/keyspace"

// A conversation's keys share the {dm:<conversation id>} hash tag, so the
// send, read-mark and removal scripts run on one Redis Cluster slot. A
// user's own keys (their list of conversations, their blocks, their
// budget of new conversations) share {dmu:<canonical name>}: no script
// touches a conversation's keys and a user's together; the use case
// writes them one after the other (see doc.go, "Two slots, one order").

// logKey is a conversation's history: one entry per message, fields from,
// text, ts (unix ms); its id orders the conversation.
func logKey(ks keyspace.Space, conv string) string { return ks.Key("dm", conv, "log") } // STREAM

// metaKey is a conversation's record: a and b (the canonical names, a < b),
// an and bn (the names as first written), call (the random id of the Open
// call that made it), guest ("1" when either was a guest when it was
// opened: its keys live GuestTTL), and per participant u: "read:u" (the id
// u read up to) and "unread:u" (messages of the other one after it).
func metaKey(ks keyspace.Space, conv string) string { return ks.Key("dm", conv, "meta") } // HASH

// removedKey records what one Remove call's script answered ("1" removed,
// "0" no such message), for redisx.CallRecordTTL: go-redis's retry of a
// late call is answered that instead of "no such message".
func removedKey(ks keyspace.Space, conv, call string) string {
	return ks.Key("dm", conv, "removed", call) // STRING, PX redisx.CallRecordTTL
}

// saidKey records a send under the sender's idempotency key ref, or "~<call>"
// for a send without one (kept redisx.CallRecordTTL): "<stream id> <ts> <text
// hash> <call> <unread>", call being the id of the Send call that stored it
// and unread the recipient's unread count it answered.
func saidKey(ks keyspace.Space, conv, user, ref string) string {
	return ks.Key("dm", conv, "said", user, ref)
} // STRING

// rateKey is the sender's token bucket in the conversation: "<tokens> <at ms>".
func rateKey(ks keyspace.Space, conv, user string) string { return ks.Key("dm", conv, "rate", user) } // STRING

// convsKey lists a user's conversations by last activity: conversation id
// → unix ms of its last message (or of its opening).
func convsKey(ks keyspace.Space, user string) string { return ks.Key("dmu", user, "convs") } // ZSET

// blocksKey is the set of the canonical names user blocks.
func blocksKey(ks keyspace.Space, user string) string { return ks.Key("dmu", user, "blocks") } // SET

// opensKey counts the conversations user opened in the current budget
// window; it expires with the window.
func opensKey(ks keyspace.Space, user string) string { return ks.Key("dmu", user, "opens") } // STRING INCR

// channel is the node-wide channel every direct event is published on
// (classic pub/sub: see doc.go, "Delivery").
func channel(ks keyspace.Space) string { return ks.Global("direct", "events") } // pub/sub channel
