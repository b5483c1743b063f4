package seen

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestKeys(t *testing.T) {
	s := keyspace.New("chatd")
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"description", metaKey(s, "alice"), "chatd:{user:alice}:seen"},
		{"bits of slot 0", bitsKey(s, "alice", 0), "chatd:{user:alice}:seen:b0"},
		{"bits of slot 11", bitsKey(s, "bob", 11), "chatd:{user:bob}:seen:b11"},
		{"default prefix", bitsKey(keyspace.New(""), "a", 0), "chatd:{user:a}:seen:b0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestUserKeysShareOneSlot(t *testing.T) {
	keys := userKeys(keyspace.New("p"), "alice", 3)
	assert.Equal(t, []string{
		"p:{user:alice}:seen",
		"p:{user:alice}:seen:b0", "p:{user:alice}:seen:b1", "p:{user:alice}:seen:b2",
	}, keys)
	for _, k := range keys {
		assert.Equal(t, keyspace.Slot(keys[0]), keyspace.Slot(k), k)
	}
}
