package keyspace

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"default prefix", Space{}.Key("lobby", "general", "rooms"), "chatd:{lobby:general}:rooms"},
		{"custom prefix", New("t1").Key("user", "alice", "seen", "3"), "t1:{user:alice}:seen:3"},
		{"no parts", New("x").Key("lb", "b"), "x:{lb:b}"},
		{"global", New("x").Global("stats", "messages"), "x:stats:messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestSlotMatchesRedis(t *testing.T) {
	// Values from the CLUSTER KEYSLOT documentation and redis-cli redirects.
	assert.Equal(t, 12182, Slot("foo"))
	assert.Equal(t, 11058, Slot("somekey"))
	assert.Equal(t, 2515, Slot("foo{hash_tag}"))
	assert.Equal(t, 5061, Slot("bar"))
	assert.Equal(t, Slot("user1000"), Slot("{user1000}.following"))
	assert.NotEqual(t, Slot("{}a"), Slot("{}b"), "an empty tag hashes the whole key")
}

func TestUnitKeysShareOneSlot(t *testing.T) {
	s := New("chatd")
	for _, unit := range [][2]string{{"lobby", "general"}, {"room", "general-3"}, {"user", "alice"}, {"session", "s1"}, {"lb", "daily@2026-11-30"}, {"settings", ""}} {
		want := Slot(s.Key(unit[0], unit[1]))
		for _, suffix := range []string{"rooms", "seats:1", "seq", "fence", "lock", "x:y:z"} {
			assert.Equal(t, want, Slot(s.Key(unit[0], unit[1], suffix)), "%v %s", unit, suffix)
		}
	}
}
