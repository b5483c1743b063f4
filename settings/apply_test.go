package settings

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// These tests drive the merge rules directly (no Redis): the orders in which
// a snapshot and changes can meet that are hard to force on a real server.

func change(key string, value string, version int64) []byte {
	op := opSet
	if value == "" {
		op, value = opDelete, "null"
	}
	b, _ := json.Marshal(wireChange{Key: key, Value: json.RawMessage(value), Version: version, Op: op})
	return b
}

func pendingReload(s *Store) bool {
	select {
	case <-s.reloadCh:
		return true
	default:
		return false
	}
}

func TestMerge(t *testing.T) {
	t.Run("a stale snapshot does not roll back a newer change", func(t *testing.T) {
		s := New(nil, Config{})
		floor := s.Version() // the reload starts...
		s.receive("", change(RoomCapacity, "70", 5))
		// ...and its snapshot, read before change 5, answers after it.
		s.applySnapshot(floor, snapshot{version: 4, fields: map[string]string{RoomCapacity: "60", MOTD: `"hi"`}})
		assert.Equal(t, 70, s.Int(RoomCapacity))
		assert.Equal(t, "hi", s.String(MOTD), "keys the change did not touch come from the snapshot")
		assert.Equal(t, int64(5), s.Version())
	})

	t.Run("a change older than the snapshot is dropped", func(t *testing.T) {
		s := New(nil, Config{})
		s.applySnapshot(0, snapshot{version: 8, fields: map[string]string{RoomCapacity: "80"}})
		s.receive("", change(RoomCapacity, "60", 6))
		assert.Equal(t, 80, s.Int(RoomCapacity))
		assert.Equal(t, int64(8), s.Version())
	})

	t.Run("changes before the first snapshot are kept when newer", func(t *testing.T) {
		s := New(nil, Config{})
		s.receive("", change(MessageMaxLength, "100", 3))
		s.receive("", change(RoomCapacity, "9", 4))
		s.applySnapshot(0, snapshot{version: 3, fields: map[string]string{MessageMaxLength: "100"}})
		assert.Equal(t, 100, s.Int(MessageMaxLength))
		assert.Equal(t, 9, s.Int(RoomCapacity))
		assert.False(t, pendingReload(s), "no gap check before the first snapshot")
	})

	t.Run("a version gap asks for a reload", func(t *testing.T) {
		s := New(nil, Config{})
		s.applySnapshot(0, snapshot{version: 2})
		s.receive("", change(RoomCapacity, "3", 3))
		assert.False(t, pendingReload(s), "3 follows 2")
		s.receive("", change(RoomCapacity, "5", 5))
		assert.True(t, pendingReload(s), "4 is missing")
		assert.Equal(t, 3, s.Int(RoomCapacity), "nothing past the hole is applied")
		assert.Equal(t, int64(3), s.Version())
		s.applySnapshot(3, snapshot{version: 5, fields: map[string]string{RoomCapacity: "5", MOTD: `"4"`}})
		assert.Equal(t, 5, s.Int(RoomCapacity), "the snapshot fills the hole")
		assert.Equal(t, "4", s.String(MOTD))
		s.receive("", change(RoomCapacity, "6", 6))
		assert.False(t, pendingReload(s))
		assert.Equal(t, 6, s.Int(RoomCapacity))
	})

	t.Run("a change the snapshot already brought is ignored", func(t *testing.T) {
		s := New(nil, Config{})
		s.applySnapshot(0, snapshot{version: 6, fields: map[string]string{RoomCapacity: "6"}})
		s.receive("", change(RoomCapacity, "5", 5))
		assert.Equal(t, 6, s.Int(RoomCapacity))
		assert.Equal(t, int64(6), s.Version())
	})

	t.Run("reordered changes of one key keep the newest", func(t *testing.T) {
		s := New(nil, Config{})
		s.receive("", change(RoomCapacity, "7", 7))
		s.receive("", change(RoomCapacity, "6", 6))
		assert.Equal(t, 7, s.Int(RoomCapacity))
		s.receive("", change(RoomCapacity, "", 8))
		assert.Equal(t, 50, s.Int(RoomCapacity), "a delete restores the default")
	})

	t.Run("a snapshot below a confirmed version means Redis lost its data", func(t *testing.T) {
		s := New(nil, Config{})
		s.applySnapshot(0, snapshot{version: 40, fields: map[string]string{RoomCapacity: "9", MOTD: `"old"`}})
		s.applySnapshot(s.Version(), snapshot{version: 1, fields: map[string]string{MOTD: `"new"`}})
		assert.Equal(t, int64(1), s.Version())
		assert.Equal(t, 50, s.Int(RoomCapacity))
		assert.Equal(t, "new", s.String(MOTD))
		assert.True(t, pendingReload(s), "looks once more for changes dropped meanwhile")
		s.receive("", change(RoomCapacity, "12", 2))
		assert.Equal(t, 12, s.Int(RoomCapacity), "the new history applies")
		assert.Equal(t, int64(2), s.Version())
	})

	t.Run("an invalid stored value reads as the default", func(t *testing.T) {
		s := New(nil, Config{})
		s.applySnapshot(0, snapshot{version: 3, fields: map[string]string{RoomCapacity: "0", "future.key": "1"}})
		assert.Equal(t, 50, s.Int(RoomCapacity))
		s.receive("", change(RoomCapacity, "7", 4))
		s.receive("", change(RoomCapacity, `"x"`, 5))
		assert.Equal(t, 50, s.Int(RoomCapacity))
		s.receive("", change("future.key", "1", 5))
		assert.True(t, pendingReload(s), "a repeated version")
		s.receive("", change("future.key", "1", 6))
		assert.Equal(t, int64(6), s.Version(), "an unknown key still counts")
	})

	t.Run("an unreadable change asks for a reload", func(t *testing.T) {
		s := New(nil, Config{})
		s.receive("", []byte("room.capacity:5:6"))
		assert.True(t, pendingReload(s))
		assert.Equal(t, int64(0), s.Version())
	})

	t.Run("snapshot changes are queued for watchers only when a value differs", func(t *testing.T) {
		s := New(nil, Config{})
		s.applySnapshot(0, snapshot{version: 3, fields: map[string]string{RoomCapacity: "50", MOTD: `"m"`}})
		assert.Equal(t, []Change{{Key: MOTD, Value: "m", Version: 3, Op: opSet}}, s.queue)
	})
}

func TestTypedReads(t *testing.T) {
	s := New(nil, Config{})
	assert.Equal(t, 50, s.Int(RoomCapacity))
	assert.Equal(t, 10.0, s.Float(RateMessagesPerSecond))
	assert.Equal(t, 10, s.Int(RateMessagesPerSecond))
	assert.Equal(t, 50.0, s.Float(RoomCapacity))
	assert.Equal(t, "", s.String(MOTD))
	assert.Equal(t, "50", s.String(RoomCapacity))
	assert.Equal(t, "0.01", s.String(SeenFPRate))
	assert.PanicsWithValue(t, `settings: unknown setting "room.capacty"`, func() { s.Int("room.capacty") })
	assert.Panics(t, func() { s.Watch("nope", func(Change) {}) })
	v, values := s.Values()
	assert.Equal(t, int64(0), v)
	assert.Len(t, values, len(Defs()))
	values[RoomCapacity] = 1
	_, again := s.Values()
	assert.Equal(t, 50, again[RoomCapacity], "Values returns a copy")
}
