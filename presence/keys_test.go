package presence

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestKeys(t *testing.T) {
	k := keys{ks: keyspace.New("chatd")}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"user", k.user("alice"), "chatd:{user:alice}:presence"},
		{"online index", k.online(), "chatd:presence:online"},
		{"node beats", k.nodeBeats(), "chatd:{nodes:registry}:beats"},
		{"node info", k.nodeInfo(), "chatd:{nodes:registry}:info"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestKeysOfOneScriptShareASlot(t *testing.T) {
	k := keys{ks: keyspace.New("chatd")}
	assert.Equal(t, keyspace.Slot(k.nodeBeats()), keyspace.Slot(k.nodeInfo()), "registry scripts")
}
