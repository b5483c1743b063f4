package notices

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
)

func TestKeys(t *testing.T) {
	ks := keyspace.New("p")
	assert.Equal(t, "p:{notices:global}:stream", streamKey(ks))
	assert.Equal(t, "p:{notices:global}:events", eventsChannel(ks))
	assert.Equal(t, "p:{notices:global}:posted:0f1e", postedKey(ks, "0f1e"))
}

func TestPostPublishesAndKeepsHistory(t *testing.T) {
	t.Parallel()
	for name, r := range map[string]*redistest.Redis{"single": redistest.New(t), "cluster": redistest.Cluster(t)} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			b := New(r.Client, Config{Prefix: r.Prefix})
			sub := r.NewClient(t).Subscribe(ctx, b.Channel())
			defer sub.Close()
			_, err := sub.Receive(ctx)
			require.NoError(t, err)

			n, err := b.Post(ctx, "maintenance at 10:00 — back soon")
			require.NoError(t, err)
			msg, err := sub.ReceiveMessage(ctx)
			require.NoError(t, err)
			ev, err := DecodeEvent([]byte(msg.Payload))
			require.NoError(t, err)
			assert.Equal(t, n.ID, ev.ID)
			assert.Equal(t, n.Text, ev.Text)

			for i := 0; i < MaxKept+50; i++ {
				_, err := b.Post(ctx, "n")
				require.NoError(t, err)
			}
			recent, err := b.Recent(ctx, 0)
			require.NoError(t, err)
			assert.Len(t, recent, MaxKept)
			for i := 1; i < len(recent); i++ {
				assert.True(t, idLess(recent[i-1].ID, recent[i].ID), "oldest first: %s then %s", recent[i-1].ID, recent[i].ID)
			}
		})
	}
}

func TestBadText(t *testing.T) {
	t.Parallel()
	r := redistest.New(t)
	b := New(r.Client, Config{Prefix: r.Prefix, Now: func() time.Time { return time.Unix(0, 0) }})
	for _, text := range []string{"", strings.Repeat("x", MaxText+1), "\xff"} {
		_, err := b.Post(context.Background(), text)
		assert.ErrorIs(t, err, ErrBadText)
	}
	_, err := DecodeEvent([]byte(`{"type":"message"}`))
	assert.Error(t, err)
}

// idLess compares two stream ids "ms-seq" numerically.
func idLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	if len(am) != len(bm) || am != bm {
		return len(am) < len(bm) || (len(am) == len(bm) && am < bm)
	}
	return len(as) < len(bs) || (len(as) == len(bs) && as < bs)
}
