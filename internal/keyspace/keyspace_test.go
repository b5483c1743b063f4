package keyspace

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"default prefix", Space{}.Key("lobby", "general", "rooms"), "chatd:{lobby:general}:rooms"},
		{"custom prefix", New("t1").Key("user", "alice", "seen", "3"), "t1:{user:alice}:seen:3"},
		{"no parts", New("x").Key("lb", "b"), "x:{lb:b}"},
		{"global", New("x").Global("stats", "messages"), "x:stats:messages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestSlotMatchesRedis(t *testing.T) {
	// Values from the CLUSTER KEYSLOT documentation and redis-cli redirects.
	assert.Equal(t, 12182, Slot("foo"))
	assert.Equal(t, 11058, Slot("somekey"))
	assert.Equal(t, 2515, Slot("foo{hash_tag}"))
	assert.Equal(t, 5061, Slot("bar"))
	assert.Equal(t, Slot("user1000"), Slot("{user1000}.following"))
	assert.NotEqual(t, Slot("{}a"), Slot("{}b"), "an empty tag hashes the whole key")
}

func TestUnitKeysShareOneSlot(t *testing.T) {
	s := New("chatd")
	for _, unit := range [][2]string{{"lobby", "general"}, {"room", "general-3"}, {"user", "alice"}, {"session", "s1"}, {"lb", "daily@2026-11-30"}, {"settings", ""}} {
		want := Slot(s.Key(unit[0], unit[1]))
		for _, suffix := range []string{"rooms", "seats:1", "seq", "fence", "lock", "x:y:z"} {
			assert.Equal(t, want, Slot(s.Key(unit[0], unit[1], suffix)), "%v %s", unit, suffix)
		}
	}
}

func TestPermanentKinds(t *testing.T) {
	tests := []struct {
		name string
		key  string
		want string // the first matching Pattern, "" for none
	}{
		{"settings hash", "{settings:live}:values", "{settings:live}:values"},
		{"a wallet", "{shop:main}:balance:alice", "{shop:*}:balance:*"},
		{"a seated lobby's seats", "{lobby:general}:leases", "{lobby:*}:*"},
		{"a board", "{lb:hall}:z", "{lb:*}:*"},
		{"a periodic board", "{lb:hall@daily:2026-11-30}:z", "{lb:*}:*"},
		{"a counter", "stats:messages", "stats:*"},
		{"a match counter", "{mm:duel}:seq", "{mm:*}:seq"},
		{"a queue's fence", "{mm:duel}:fence", "{mm:*}:fence"},
		{"a waiting ticket must expire", "{mm:duel}:t:ABC", ""},
		{"a user's match events must expire", "{user:alice}:mm:events", ""},
		{"a claim must expire", "{user:alice}:claim", ""},
		{"an idempotency record must expire", "{shop:main}:idem:alice:k1", ""},
		{"a seen filter must expire", "{user:alice}:seen:b0", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kinds := PermanentKinds(tt.key)
			if tt.want == "" {
				assert.Empty(t, kinds)
				return
			}
			if assert.NotEmpty(t, kinds) {
				assert.Equal(t, tt.want, kinds[0].Pattern)
			}
		})
	}
	for _, k := range Permanent {
		_, err := path.Match(k.Pattern, "")
		assert.NoError(t, err, "bad pattern %q", k.Pattern)
		assert.NotEmpty(t, k.Name, k.Pattern)
		assert.NotEmpty(t, k.Owner, k.Pattern)
		assert.NotEmpty(t, k.Why, k.Pattern)
	}
}

func TestHolderKeyAndUnit(t *testing.T) {
	var lobby Kind
	for _, k := range Permanent {
		if k.Holder != "" {
			lobby = k
		}
	}
	assert.Equal(t, "{lobby:general}:members", lobby.HolderKey("{lobby:general}:leases"))
	assert.Equal(t, "", Kind{}.HolderKey("{lobby:general}:seats:3"))
	kind, id, ok := Unit("{lb:hall@daily:2026-11-30}:z")
	assert.True(t, ok)
	assert.Equal(t, "lb", kind)
	assert.Equal(t, "hall@daily:2026-11-30", id)
	_, _, ok = Unit("stats:messages")
	assert.False(t, ok)
	name, ok := New("t1").Strip("t1:{user:a}:claim")
	assert.True(t, ok)
	assert.Equal(t, "{user:a}:claim", name)
	_, ok = New("t1").Strip("t2:{user:a}:claim")
	assert.False(t, ok)
}

// TestREADMEListsThePermanentKinds: README.md's "state growth" row names
// exactly the Names of Permanent, so the documentation and the code list
// cannot drift apart.
func TestREADMEListsThePermanentKinds(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var row string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| state growth |") {
			row = line
		}
	}
	require.NotEmpty(t, row, `README.md has no "| state growth |" row`)
	m := regexp.MustCompile("only the kinds in `keyspace.Permanent` keep no TTL \\(([^)]*)\\)").FindStringSubmatch(row)
	require.NotNil(t, m, "the state growth row must say: only the kinds in `keyspace.Permanent` keep no TTL (name, name, …)")
	var want []string
	for _, k := range Permanent {
		if !slices.Contains(want, k.Name) {
			want = append(want, k.Name)
		}
	}
	assert.Equal(t, want, strings.Split(m[1], ", "), "README.md lists the Names of keyspace.Permanent, in order")
}

// TestKeyAllocatesOnce: a key is one allocation, whatever its parts.
func TestKeyAllocatesOnce(t *testing.T) {
	s := New("chatd")
	allocs := testing.AllocsPerRun(100, func() {
		_ = s.Key("lobby", "general", "said", "alice", "s1:0123456789abcdef0123456789abcdef")
	})
	assert.Equal(t, 1.0, allocs)
}
