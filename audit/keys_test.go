package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
)

func TestKeys(t *testing.T) {
	assert.Equal(t, "chatd:admin:audit", logKey(keyspace.New("chatd")))
	assert.Equal(t, "t1:admin:audit", logKey(keyspace.New("t1")))
	assert.Equal(t, "chatd:admin:audit:refused", refusedKey(keyspace.New("chatd")))
	assert.Equal(t, "chatd:admin:audit:server", serverKey(keyspace.New("chatd")))
}
