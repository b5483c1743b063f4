package settings

import (
	"encoding/json"
	"maps"
)

// wireChange is the JSON the write script publishes.
type wireChange struct {
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Version int64           `json:"version"`
	Op      string          `json:"op"`
}

// receive handles one message of the change channel, on the bus goroutine.
func (s *Store) receive(_ string, payload []byte) {
	var c wireChange
	if err := json.Unmarshal(payload, &c); err != nil || c.Version <= 0 || (c.Op != opSet && c.Op != opDelete) {
		// A change we cannot read is a change we lost: the snapshot has it.
		s.log.Warn("unreadable settings change; reloading", "payload", clip(string(payload)), "err", err)
		s.metrics.gaps.Inc()
		s.requestReload()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Redis delivers one channel's messages in publish order, and the script
	// publishes in version order, so after a snapshot the stream must go
	// streamVer+1, +2, ... A change past a hole is not applied (the values
	// would then claim a version whose earlier changes are missing): the
	// snapshot, read after it was published, brings it with the hole.
	// A change at or below streamVer is a duplicate of what a snapshot
	// brought, or Redis went back (lost its data): the reload tells which.
	if s.snapshotted && c.Version != s.streamVer+1 {
		if c.Version > s.streamVer {
			s.log.Info("settings version gap; reloading", "have", s.streamVer, "got", c.Version)
			s.metrics.gaps.Inc()
		}
		s.requestReload()
		return
	}
	s.streamVer = max(s.streamVer, c.Version)
	s.apply(c.Key, c.Op, c.Value, c.Version, "pubsub")
}

// apply applies one change if it is newer than what the key holds. s.mu is
// held.
func (s *Store) apply(key, op string, raw json.RawMessage, version int64, source string) {
	d, ok := byKey[key]
	if !ok {
		// A key a newer chatd knows: nothing to hold, but the version counts.
		s.publish(s.cur.Load().values, version)
		return
	}
	if version <= s.keyVer[key] {
		return // stale: this key already holds a newer value
	}
	value := d.Default
	if op == opSet {
		v, err := d.validate(raw)
		if err != nil {
			s.log.Warn("invalid settings value in Redis; using the default", "key", key, "err", err)
		} else {
			value = v
		}
	}
	s.keyVer[key] = version
	old := s.cur.Load()
	values := maps.Clone(old.values)
	values[key] = value
	s.publish(values, version)
	s.metrics.applied.WithLabelValues(source).Inc()
	s.enqueue(Change{Key: key, Value: value, Version: version, Op: op})
}

// publish makes values, at version or the version held if newer, what
// reads see. s.mu is held.
func (s *Store) publish(values map[string]any, version int64) {
	version = max(version, s.cur.Load().version)
	s.cur.Store(&state{version: version, values: values})
	s.metrics.version.Set(float64(version))
}

// applySnapshot merges a snapshot read after this Store held version floor.
func (s *Store) applySnapshot(floor int64, snap snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Redis' version counter only grows while Redis keeps its data. A
	// snapshot below a version Redis confirmed before we asked means it did
	// not: follow Redis from scratch, and look once more, since changes of
	// the new history may have been dropped as stale meanwhile.
	lost := snap.version < floor
	if lost {
		s.log.Warn("settings version went back in Redis (data lost?); taking its values",
			"had", floor, "redis", snap.version)
		s.metrics.gaps.Inc()
		clear(s.keyVer)
		s.requestReload()
	}
	old := s.cur.Load()
	values := maps.Clone(old.values)
	var changes []Change
	for i := range defs {
		d := &defs[i]
		if s.keyVer[d.Key] > snap.version {
			continue // a change newer than the snapshot already arrived
		}
		value, op := d.Default, opDelete
		if raw, ok := snap.fields[d.Key]; ok {
			if v, err := d.validate(json.RawMessage(raw)); err != nil {
				s.log.Warn("invalid settings value in Redis; using the default", "key", d.Key, "err", err)
			} else {
				value, op = v, opSet
			}
		}
		s.keyVer[d.Key] = snap.version
		if values[d.Key] != value {
			values[d.Key] = value
			changes = append(changes, Change{Key: d.Key, Value: value, Version: snap.version, Op: op})
		}
	}
	if lost {
		s.cur.Store(&state{version: snap.version, values: values})
		s.metrics.version.Set(float64(snap.version))
		s.streamVer = snap.version
	} else {
		s.publish(values, snap.version)
		s.streamVer = max(s.streamVer, snap.version)
	}
	s.snapshotted = true
	for _, c := range changes {
		s.metrics.applied.WithLabelValues("snapshot").Inc()
		s.enqueue(c)
	}
}
