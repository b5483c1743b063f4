package ratelimit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"bucket", keys{keyspace.New("chatd")}.bucket("alice"), "chatd:{user:alice}:bucket"},
		{"bucket default prefix", keys{}.bucket("bob"), "chatd:{user:bob}:bucket"},
		{"bucket custom prefix", keys{keyspace.New("t1")}.bucket("a_b-9"), "t1:{user:a_b-9}:bucket"},
		{"window", keys{keyspace.New("chatd")}.window("alice"), "chatd:{user:alice}:window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestBucketIsInTheUserSlot(t *testing.T) {
	k := keys{keyspace.New("chatd")}
	assert.Equal(t, keyspace.Slot(keyspace.New("chatd").Key("user", "alice", "seen", "1")), keyspace.Slot(k.bucket("alice")))
}
