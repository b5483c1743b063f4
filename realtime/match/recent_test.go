package match

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRecentDeliversAPayloadOnce(t *testing.T) {
	r := newRecent()
	now := time.UnixMilli(1_000_000)
	assert.True(t, r.first([]byte(`[{"a":1}]`), now))
	assert.False(t, r.first([]byte(`[{"a":1}]`), now.Add(time.Second)), "the same payload again")
	assert.True(t, r.first([]byte(`[{"a":2}]`), now.Add(time.Second)), "another payload")
	assert.True(t, r.first([]byte(`[{"a":1}]`), now.Add(recentKeep+2*time.Second)), "forgotten after keep")
}

func TestRecentIsBounded(t *testing.T) {
	r := newRecent()
	now := time.UnixMilli(1_000_000)
	for i := range 3 * recentMax {
		assert.True(t, r.first(fmt.Appendf(nil, "p%d", i), now))
	}
	assert.LessOrEqual(t, len(r.seen), recentMax)
	assert.Len(t, r.order, len(r.seen))
	assert.True(t, r.first([]byte("p0"), now), "the oldest went first")
	assert.False(t, r.first(fmt.Appendf(nil, "p%d", 3*recentMax-1), now), "the newest is kept")
}
