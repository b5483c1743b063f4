package rooms

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/lock"
)

func TestKeys(t *testing.T) {
	ks := keyspace.New("p")
	tests := []struct {
		name, got, want string
	}{
		{"rooms", roomsKey(ks, "general"), "p:{lobby:general}:rooms"},
		{"open", openKey(ks, "general"), "p:{lobby:general}:open"},
		{"opencap", openCapKey(ks, "general"), "p:{lobby:general}:opencap"},
		{"due", dueKey(ks, "general"), "p:{lobby:general}:due"},
		{"users", usersKey(ks, "general"), "p:{lobby:general}:users"},
		{"seq", seqKey(ks, "general"), "p:{lobby:general}:seq"},
		{"seats prefix", seatsPrefix(ks, "general"), "p:{lobby:general}:seats:"},
		{"seats", seatsKey(ks, "general", 3), "p:{lobby:general}:seats:3"},
		{"record prefix", recordPrefix(ks, "general"), "p:{lobby:general}:room:"},
		{"record", recordKey(ks, "general", 3), "p:{lobby:general}:room:3"},
		{"history", historyKey(ks, "general", 3), "p:{lobby:general}:history:3"},
		{"history prefix", historyPrefix(ks, "general"), "p:{lobby:general}:history:"},
		{"atts", attsKey(ks, "general"), "p:{lobby:general}:atts"},
		{"rest prefix", restPrefix(ks, "general"), "p:{lobby:general}:rest:"},
		{"rest", restKey(ks, "general", 3), "p:{lobby:general}:rest:3"},
		{"rate", rateKey(ks, "general", "alice"), "p:{lobby:general}:rate:alice"},
		{"channel prefix", channelPrefix(ks, "general"), "p:{lobby:general}:events:"},
		{"channel", channel(ks, "general", 3), "p:{lobby:general}:events:3"},
		{"ver", verKey(ks, "general"), "p:{lobby:general}:ver"},
		{"read", readKey(ks, "general", "alice"), "p:{lobby:general}:read:alice"},
		{"online", onlineKey(ks), "p:{rooms:index}:online"},
		{"online info", onlineInfoKey(ks), "p:{rooms:index}:info"},
		{"online gone", onlineGoneKey(ks), "p:{rooms:index}:gone"},
		{"lobbies", lobbiesKey(ks), "p:rooms:lobbies"},
		{"messages total", messagesTotalKey(ks), "p:stats:messages"},
		{"rooms total", roomsTotalKey(ks), "p:stats:rooms"},
		{"lock name", lockName("general"), "lobby:general"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestLobbyKeysShareTheLockSlot(t *testing.T) {
	ks := keyspace.New("p")
	lockKey, fence := lock.New(nil, lock.Config{Prefix: "p"}).Keys(lockName("a.b-c"))
	want := keyspace.Slot(fence)
	for _, k := range []string{
		lockKey, roomsKey(ks, "a.b-c"), openKey(ks, "a.b-c"), openCapKey(ks, "a.b-c"), dueKey(ks, "a.b-c"),
		usersKey(ks, "a.b-c"), seqKey(ks, "a.b-c"), seatsKey(ks, "a.b-c", 12), recordKey(ks, "a.b-c", 12),
		historyKey(ks, "a.b-c", 12), seatsPrefix(ks, "a.b-c") + "999", attsKey(ks, "a.b-c"),
		restKey(ks, "a.b-c", 12), rateKey(ks, "a.b-c", "alice"), historyPrefix(ks, "a.b-c") + "7",
		channel(ks, "a.b-c", 12),
	} {
		assert.Equal(t, want, keyspace.Slot(k), k)
	}
}
