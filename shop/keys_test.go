package shop

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestKeys(t *testing.T) {
	k := keys{ks: keyspace.New("chatd"), shop: "main"}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"item", k.item("sword"), "chatd:{shop:main}:item:sword"},
		{"items", k.items(), "chatd:{shop:main}:items"},
		{"balance", k.balance("alice"), "chatd:{shop:main}:balance:alice"},
		{"inventory", k.inventory("alice"), "chatd:{shop:main}:inv:alice"},
		{"idempotency record", k.idem("alice", "k-1"), "chatd:{shop:main}:idem:alice:k-1"},
		{"purchase counter", k.purchases(), "chatd:{shop:main}:purchases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestKeysOfOnePurchaseShareASlot(t *testing.T) {
	k := keys{ks: keyspace.New("chatd"), shop: "main"}
	want := keyspace.Slot(k.items())
	for _, key := range []string{k.item("sword"), k.balance("alice"), k.inventory("bob"), k.idem("carol", "x{y}z"), k.purchases()} {
		assert.Equal(t, want, keyspace.Slot(key), key)
	}
	other := keys{ks: keyspace.New("chatd"), shop: "eu"}
	assert.NotEqual(t, want, keyspace.Slot(other.items()), "another shop is another slot")
}
