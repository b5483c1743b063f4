package matchmaking

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/lock"
)

func TestKeys(t *testing.T) {
	k := keys{ks: keyspace.New("chatd"), queue: "duel"}
	for _, tt := range []struct{ name, got, want string }{
		{"pool", k.pool(), "chatd:{mm:duel}:pool"},
		{"age index", k.age(), "chatd:{mm:duel}:age"},
		{"user map", k.users(), "chatd:{mm:duel}:users"},
		{"ticket", k.ticket("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), "chatd:{mm:duel}:t:ABCDEFGHIJKLMNOPQRSTUVWXYZ"},
		{"match", k.match(17), "chatd:{mm:duel}:m:17"},
		{"match counter", k.seq(), "chatd:{mm:duel}:seq"},
		{"outbox", k.outbox(), "chatd:{mm:duel}:outbox"},
		{"fresh", k.fresh(), "chatd:{mm:duel}:fresh"},
		{"sweep", k.sweep(), "chatd:{mm:duel}:sweep"},
		{"trouble", k.trouble(), "chatd:{mm:duel}:trouble"},
		{"lock name", lockName("duel"), "mm:duel"},
		{"user events", userEvents(keyspace.New("chatd"), "Ann"), "chatd:{user:ann}:mm:events"},
		{"events channel", eventsChannel(keyspace.New("chatd")), "chatd:mm:events"},
	} {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.want, tt.got) })
	}
}

func TestKeysOfAQueueShareTheLocksSlot(t *testing.T) {
	k := keys{ks: keyspace.New("chatd"), queue: "duel"}
	lockKey, fenceKey := lock.New(nil, lock.Config{Prefix: "chatd"}).Keys(lockName("duel"))
	assert.Equal(t, "chatd:{mm:duel}:fence", fenceKey)
	want := keyspace.Slot(fenceKey)
	for _, key := range []string{lockKey, k.pool(), k.age(), k.users(), k.ticket("X"), k.match(1), k.seq(), k.outbox(), k.fresh(), k.sweep(), k.trouble()} {
		assert.Equal(t, want, keyspace.Slot(key), key)
	}
	other := keys{ks: keyspace.New("chatd"), queue: "team"}
	assert.NotEqual(t, want, keyspace.Slot(other.pool()), "another queue is another slot")
}
