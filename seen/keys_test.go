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
		{"bits of slot 0", bitsKey(s, "alice", 0), "chatd:{user:alice}:seen:0"},
		{"bits of slot 1", bitsKey(s, "alice", 1), "chatd:{user:alice}:seen:1"},
		{"meta of slot 0", metaKey(s, "alice", 0), "chatd:{user:alice}:seen:0:meta"},
		{"meta of slot 2", metaKey(s, "bob", 2), "chatd:{user:bob}:seen:2:meta"},
		{"default prefix", bitsKey(keyspace.New(""), "a", 0), "chatd:{user:a}:seen:0"},
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
		"p:{user:alice}:seen:0", "p:{user:alice}:seen:0:meta",
		"p:{user:alice}:seen:1", "p:{user:alice}:seen:1:meta",
		"p:{user:alice}:seen:2", "p:{user:alice}:seen:2:meta",
	}, keys)
	for _, k := range keys {
		assert.Equal(t, keyspace.Slot(keys[0]), keyspace.Slot(k), k)
	}
}
