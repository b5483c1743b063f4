package identity

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
		{"claim", claimKey(keyspace.New("chatd"), "alice"), "chatd:{user:alice}:claim"},
		{"default prefix", claimKey(keyspace.New(""), "bob"), "chatd:{user:bob}:claim"},
		{"in the user's slot", claimKey(keyspace.New("p"), "alice"), "p:{user:alice}:claim"},
		{"revoked", revokedKey(keyspace.New("p"), "alice"), "p:{user:alice}:revoked"},
		{"events", eventsChannel(keyspace.New("p")), "p:identity:events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
	assert.Equal(t, keyspace.Slot("p:{user:alice}:rate"), keyspace.Slot(claimKey(keyspace.New("p"), "alice")))
	assert.Equal(t, keyspace.Slot(claimKey(keyspace.New("p"), "alice")), keyspace.Slot(revokedKey(keyspace.New("p"), "alice")), "the claim scripts touch both")
}
