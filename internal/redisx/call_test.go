package redisx

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCallID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := CallID()
		require.Regexp(t, regexp.MustCompile(`^[0-9a-f]{16}$`), id)
		require.False(t, seen[id], "id %s twice", id)
		seen[id] = true
	}
}

// TestBoundCall: a call's context gets a deadline CallBound away when its
// caller's has none or a later one, and keeps an earlier one; a record
// outlives every copy of its call by 20 s.
func TestBoundCall(t *testing.T) {
	start := time.Now()
	for _, tc := range []struct {
		name   string
		parent time.Duration // 0: no deadline
		want   time.Duration
	}{
		{"no deadline", 0, CallBound},
		{"a later deadline", time.Hour, CallBound},
		{"an earlier deadline", time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := context.Background()
			if tc.parent > 0 {
				var cancel context.CancelFunc
				parent, cancel = context.WithTimeout(parent, tc.parent)
				defer cancel()
			}
			ctx, cancel := BoundCall(parent)
			defer cancel()
			d, ok := ctx.Deadline()
			require.True(t, ok)
			assert.WithinRange(t, d, start.Add(tc.want), time.Now().Add(tc.want))
		})
	}
	assert.GreaterOrEqual(t, CallRecordTTL-CallBound, 20*time.Second)
}
