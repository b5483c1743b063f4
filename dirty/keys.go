package dirty

import (
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// keys builds every key and channel of the package. Everything about one
// session is in the {session:S} slot, so the mark, open and wait scripts are
// atomic on one Cluster slot.
type keys struct {
	ks keyspace.Space
}

// owner marks a live session and names its user; its TTL is the session's.
func (k keys) owner(session string) string { return k.ks.Key("session", session, "user") } // STRING

// mask is the session's dirty bitmap, one SETBIT offset per Section.
func (k keys) mask(session string) string { return k.ks.Key("session", session, "mask") } // STRING (bitmap)

// taken is one take's record: the mask it took (GETDEL), kept
// redisx.CallRecordTTL so that go-redis' retry of the same call answers it
// instead of taking again.
// call is a random nonce, one per Take or per script call of a Wait.
func (k keys) taken(session, call string) string { return k.ks.Key("session", session, "taken", call) } // STRING (bitmap), PX redisx.CallRecordTTL

// waiters are the wake channels of the nodes where a long poll of the session waits.
func (k keys) waiters(session string) string { return k.ks.Key("session", session, "waiters") } // SET

// cursor is the session's last delivered message id per room.
func (k keys) cursor(session string) string { return k.ks.Key("session", session, "cursor") } // HASH

// userSessions are the user's sessions, scored by expiry (unix ms).
func (k keys) userSessions(user string) string {
	return k.ks.Key("user", names.Canonical(user), "dirty", "sessions")
} // ZSET

// liveSessions are all sessions, scored by expiry (unix ms), for MarkAll.
func (k keys) liveSessions() string { return k.ks.Global("dirty", "sessions") } // ZSET

// followers are the users who follow a topic (a board they posted to).
func (k keys) followers(topic string) string { return k.ks.Key("topic", topic, "followers") } // SET

// follows are the topics a user follows, scored by when the follow lapses (unix ms).
func (k keys) follows(user string) string {
	return k.ks.Key("user", names.Canonical(user), "dirty", "follows")
} // ZSET

// wakeChannel is the pub/sub channel of one node's long-poll waiters.
func (k keys) wakeChannel(node string) string { return k.ks.Global("dirty", "wake", node) } // CHANNEL
