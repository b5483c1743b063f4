package notices

import "github.com/chatd/chatd/internal/keyspace"

// unit is the hash-tag unit of every notices key.
const unitKind, unitID = "notices", "global"

func streamKey(ks keyspace.Space) string { return ks.Key(unitKind, unitID, "stream") } // STREAM

func eventsChannel(ks keyspace.Space) string { return ks.Key(unitKind, unitID, "events") } // channel
