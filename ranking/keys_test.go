package ranking

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestKeys(t *testing.T) {
	sp := keyspace.New("chatd")
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"all-time board", boardKey(sp, "clicks"), "chatd:{lb:clicks}:z"},
		{"players", playersKey(sp, "clicks"), "chatd:{lb:clicks}:h"},
		{"sequence", seqKey(sp, "clicks"), "chatd:{lb:clicks}:seq"},
		{"daily period", boardKey(sp, "clicks@daily:2026-11-30"), "chatd:{lb:clicks@daily:2026-11-30}:z"},
		{"weekly period", playersKey(keyspace.New("x"), "clicks@weekly:2026-W49"), "x:{lb:clicks@weekly:2026-W49}:h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestBoardKeysShareOneSlot(t *testing.T) {
	sp := keyspace.New("chatd")
	for _, id := range []string{"clicks", "a.b-c_d", "clicks@daily:2026-11-30", "clicks@weekly:2026-W49"} {
		slot := keyspace.Slot(boardKey(sp, id))
		assert.Equal(t, slot, keyspace.Slot(playersKey(sp, id)), id)
		assert.Equal(t, slot, keyspace.Slot(seqKey(sp, id)), id)
	}
}
