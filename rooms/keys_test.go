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
		{"members", membersKey(ks, "general"), "p:{lobby:general}:members"},
		{"leases", leasesKey(ks, "general"), "p:{lobby:general}:leases"},
		{"attachments", attsKey(ks, "general"), "p:{lobby:general}:attachments"},
		{"attachment ids", attIDsKey(ks, "general"), "p:{lobby:general}:attids"},
		{"rest", restKey(ks, "general"), "p:{lobby:general}:rest"},
		{"rooms", roomsKey(ks, "general"), "p:{lobby:general}:rooms"},
		{"open", openKey(ks, "general"), "p:{lobby:general}:open"},
		{"opencap", openCapKey(ks, "general"), "p:{lobby:general}:opencap"},
		{"seq", seqKey(ks, "general"), "p:{lobby:general}:seq"},
		{"records", recordsKey(ks, "general"), "p:{lobby:general}:records"},
		{"history", historyKey(ks, "general", 3), "p:{lobby:general}:history:3"},
		{"said", saidKey(ks, "general", "alice", "s1:c-1"), "p:{lobby:general}:said:alice:s1:c-1"},
		{"claim", claimKey(ks, "alice", "s1:c-1"), "p:{user:alice}:said:s1:c-1"},
		{"counted", countedKey(ks, "ab12"), "p:stats:messages:counted:{p:stats:messages}:ab12"},
		{"rooms counted", roomsCountedKey(ks, "ab12"), "p:stats:rooms:counted:{p:stats:rooms}:ab12"},
		{"user lobbies", userLobbiesKey(ks, "alice"), "p:{user:alice}:lobbies"},
		{"rate", rateKey(ks, "general", "alice"), "p:{lobby:general}:sayrate:alice"},
		{"channel prefix", channelPrefix(ks, "general"), "p:{lobby:general}:events:"},
		{"channel", channel(ks, "general", 3), "p:{lobby:general}:events:3"},
		{"ver", verKey(ks, "general"), "p:{lobby:general}:ver"},
		{"runs", runsKey(ks, "general"), "p:{lobby:general}:runs"},
		{"run attachments", runAttsKey(ks, "general"), "p:{lobby:general}:runatts"},
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
		lockKey, membersKey(ks, "a.b-c"), leasesKey(ks, "a.b-c"), attsKey(ks, "a.b-c"), attIDsKey(ks, "a.b-c"),
		restKey(ks, "a.b-c"), roomsKey(ks, "a.b-c"), openKey(ks, "a.b-c"), openCapKey(ks, "a.b-c"),
		seqKey(ks, "a.b-c"), recordsKey(ks, "a.b-c"), verKey(ks, "a.b-c"), historyKey(ks, "a.b-c", 12),
		runsKey(ks, "a.b-c"), runAttsKey(ks, "a.b-c"),
		rateKey(ks, "a.b-c", "alice"), readKey(ks, "a.b-c", "alice"),
		channel(ks, "a.b-c", 12),
	} {
		assert.Equal(t, want, keyspace.Slot(k), k)
	}
}

func TestTheCounterTokenSharesTheCounterSlot(t *testing.T) {
	for _, prefix := range []string{"chatd", "p", "a{b}c", "{x}"} {
		ks := keyspace.New(prefix)
		assert.Equal(t, keyspace.Slot(messagesTotalKey(ks)), keyspace.Slot(countedKey(ks, "c0ffee")), prefix)
		assert.Equal(t, keyspace.Slot(roomsTotalKey(ks)), keyspace.Slot(roomsCountedKey(ks, "c0ffee")), prefix)
	}
	ks := keyspace.New("p")
	assert.Equal(t, keyspace.Slot(roomsKey(ks, "g")), keyspace.Slot(saidKey(ks, "g", "alice", "k{x}")))
}
