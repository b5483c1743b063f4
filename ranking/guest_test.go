package ranking

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// TestPostIdleTTLOnlyLengthens: a post with PostOptions.IdleTTL gives a
// board it creates that shorter life, never shortens a board that lives
// longer, and a later post without it gives the board Config.IdleTTL.
func TestPostIdleTTLOnlyLengthens(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	s := newService(t, r, Config{})
	short := 24 * time.Hour
	ttls := func(board string) []time.Duration {
		var out []time.Duration
		for _, k := range []string{boardKey(s.sp, board), playersKey(s.sp, board), seqKey(s.sp, board)} {
			d, err := r.Client.PTTL(ctx, k).Result()
			require.NoError(t, err)
			out = append(out, d)
		}
		return out
	}
	guest := PostOptions{IdleTTL: short}

	_, err := s.PostWith(ctx, "guests-only", "gus", sc(t, "1"), Best, guest)
	require.NoError(t, err)
	for _, d := range ttls("guests-only") {
		assert.Greater(t, d, short-time.Minute)
		assert.LessOrEqual(t, d, short, "a board a guest creates lives the guest's TTL")
	}

	_, err = s.PostWith(ctx, "kept", "reg", sc(t, "1"), Best, PostOptions{})
	require.NoError(t, err)
	_, err = s.PostWith(ctx, "kept", "gus", sc(t, "2"), Best, guest)
	require.NoError(t, err)
	for _, d := range ttls("kept") {
		assert.Greater(t, d, DefaultIdleTTL-time.Minute, "a guest's post does not shorten a board that lives longer")
	}

	_, err = s.PostWith(ctx, "guests-only", "reg", sc(t, "3"), Best, PostOptions{})
	require.NoError(t, err)
	for _, d := range ttls("guests-only") {
		assert.Greater(t, d, DefaultIdleTTL-time.Minute, "a registered user's post gives the board IdleTTL")
	}
}
