package settings

import "github.com/chatd/chatd/internal/keyspace"

// unit is the hash-tag unit of every settings key: {settings:live}. The hash,
// the version counter and the change channel share it, so the write script
// runs on one Cluster slot.
const unitKind, unitID = "settings", "live"

// keys builds the keys of this package from the configured prefix.
type keys struct {
	space keyspace.Space
}

// values holds the settings set away from their default: field = key,
// value = the canonical JSON of the value.
func (k keys) values() string { return k.space.Key(unitKind, unitID, "values") } // HASH

// version counts accepted writes; INCR'd by every set and reset.
func (k keys) version() string { return k.space.Key(unitKind, unitID, "version") } // STRING (integer)

// changes is the pub/sub channel carrying one JSON change per write.
func (k keys) changes() string { return k.space.Key(unitKind, unitID, "changes") } // channel
