package dirty

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
		{"owner", k.owner("s1"), "chatd:{session:s1}:user"},
		{"mask", k.mask("s1"), "chatd:{session:s1}:mask"},
		{"waiters", k.waiters("s1"), "chatd:{session:s1}:waiters"},
		{"taken", k.taken("s1", "0f1e"), "chatd:{session:s1}:taken:0f1e"},
		{"cursor", k.cursor("s1"), "chatd:{session:s1}:cursor"},
		{"user sessions", k.userSessions("alice"), "chatd:{user:alice}:dirty:sessions"},
		{"live sessions", k.liveSessions(), "chatd:dirty:sessions"},
		{"followers", k.followers("daily"), "chatd:{topic:daily}:followers"},
		{"follows", k.follows("alice"), "chatd:{user:alice}:dirty:follows"},
		{"wake channel", k.wakeChannel("node-1"), "chatd:dirty:wake:node-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestSessionKeysShareASlot(t *testing.T) {
	k := keys{ks: keyspace.New("chatd")}
	slot := keyspace.Slot(k.owner("tok-42"))
	for _, key := range []string{k.mask("tok-42"), k.waiters("tok-42"), k.cursor("tok-42"), k.taken("tok-42", "0123abcd")} {
		assert.Equal(t, slot, keyspace.Slot(key), key)
	}
}
