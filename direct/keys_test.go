package direct

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestDirectKeys(t *testing.T) {
	ks := keyspace.New("p")
	for _, tc := range []struct{ got, want string }{
		{logKey(ks, "dm-ab"), "p:{dm:dm-ab}:log"},
		{metaKey(ks, "dm-ab"), "p:{dm:dm-ab}:meta"},
		{saidKey(ks, "dm-ab", "al", "r1"), "p:{dm:dm-ab}:said:al:r1"},
		{rateKey(ks, "dm-ab", "al"), "p:{dm:dm-ab}:rate:al"},
		{convsKey(ks, "al"), "p:{dmu:al}:convs"},
		{blocksKey(ks, "al"), "p:{dmu:al}:blocks"},
		{opensKey(ks, "al"), "p:{dmu:al}:opens"},
		{channel(ks), "p:direct:events"},
	} {
		assert.Equal(t, tc.want, tc.got)
	}
}
