package settings

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestKeys(t *testing.T) {
	k := keys{keyspace.New("chatd")}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"values", k.values(), "chatd:{settings:live}:values"},
		{"version", k.version(), "chatd:{settings:live}:version"},
		{"changes", k.changes(), "chatd:{settings:live}:changes"},
		{"custom prefix", keys{keyspace.New("t1")}.values(), "t1:{settings:live}:values"},
		{"default prefix", keys{}.version(), "chatd:{settings:live}:version"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.got)
		})
	}
}

func TestKeysShareOneSlot(t *testing.T) {
	k := keys{keyspace.New("chatd")}
	assert.Equal(t, keyspace.Slot(k.values()), keyspace.Slot(k.version()))
	assert.Equal(t, keyspace.Slot(k.values()), keyspace.Slot(k.changes()))
}
