package notices

import "github.com/chatd/chatd/internal/keyspace"

// unit is the hash-tag unit of every notices key.
const unitKind, unitID = "notices", "global"

func streamKey(ks keyspace.Space) string { return ks.Key(unitKind, unitID, "stream") } // STREAM

func eventsChannel(ks keyspace.Space) string { return ks.Key(unitKind, unitID, "events") } // channel

// postedKey is one Post call's record: the id of the notice it stored, kept
// redisx.CallRecordTTL so that go-redis' retry of the call answers it instead
// of posting again. call is a random nonce, one per Post.
func postedKey(ks keyspace.Space, call string) string {
	return ks.Key(unitKind, unitID, "posted", call)
} // STRING stream id, PX redisx.CallRecordTTL
