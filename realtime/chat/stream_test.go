package chat

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPosition pins the text form of a stream's position (the SSE event
// id): rooms sorted, ids padded, and every malformed form refused.
func TestPosition(t *testing.T) {
	t.Run("round trip with rooms sorted and ids padded", func(t *testing.T) {
		p, err := ParsePosition("quiz-1@1796114764870-2,general-3@1796114764962-000007")
		require.NoError(t, err)
		assert.Equal(t, Position{"general-3": "1796114764962-000007", "quiz-1": "1796114764870-000002"}, p)
		assert.Equal(t, "general-3@1796114764962-000007,quiz-1@1796114764870-000002", p.String())
		again, err := ParsePosition(p.String())
		require.NoError(t, err)
		assert.Equal(t, p, again)
	})
	t.Run("empty is the empty position", func(t *testing.T) {
		p, err := ParsePosition("")
		require.NoError(t, err)
		assert.Empty(t, p)
		assert.Equal(t, "", Position{}.String())
	})
	many := make([]string, maxPositionRooms+1)
	for i := range many {
		many[i] = "r-" + string(rune('1'+i%9)) + strings.Repeat("0", i/9) + "@1-1"
	}
	for name, bad := range map[string]string{
		"no @":               "general-3",
		"empty id":           "general-3@",
		"trailing comma":     "general-3@1-1,",
		"bad room":           "no spaces-1@1-1",
		"room without seq":   "general@1-1",
		"bad id":             "general-3@x-1",
		"too many rooms":     strings.Join(many, ","),
		"longer than 8 KiB":  strings.Repeat("a", maxPositionLen+1),
		"id with extra part": "general-3@1-1-1",
	} {
		t.Run(name+" is refused", func(t *testing.T) {
			_, err := ParsePosition(bad)
			assert.True(t, errors.Is(err, ErrBadPosition), "%q: %v", bad, err)
		})
	}
}
