package direct_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redistest"
)

func newDirect(t *testing.T, r *redistest.Redis, cfg direct.Config) *direct.Service {
	cfg.Prefix = r.Prefix
	return direct.New(r.NewClient(t), cfg)
}

func TestDirectConversationIsOnePerPairWhateverTheCase(t *testing.T) {
	t.Parallel()
	s := direct.New(nil, direct.Config{Key: []byte("k")})
	id := s.ConversationID("Alice", "bob")
	assert.Equal(t, id, s.ConversationID("BOB", "alice"))
	assert.True(t, direct.IsConversationID(id))
	assert.NotEqual(t, id, direct.New(nil, direct.Config{Key: []byte("other")}).ConversationID("alice", "bob"),
		"the id depends on the key: not computable from the names alone")
	assert.False(t, direct.IsConversationID("alice"))
}

func TestDirectSendReadListAndIdempotency(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name string
		r    func(testing.TB) *redistest.Redis
	}{{"single", redistest.Real}, {"cluster", redistest.Cluster}} {
		t.Run(kind.name, func(t *testing.T) {
			ctx := context.Background()
			s := newDirect(t, kind.r(t), direct.Config{Key: []byte("k")})
			conv, created, err := s.Open(ctx, "Alice", "bob", direct.OpenOptions{})
			require.NoError(t, err)
			assert.True(t, created)
			again, created, err := s.Open(ctx, "BOB", "ALICE", direct.OpenOptions{})
			require.NoError(t, err)
			assert.False(t, created, "one conversation per pair, whatever the case")
			assert.Equal(t, conv.ID, again.ID)

			first, err := s.Send(ctx, conv, "Alice", "hi", direct.SendOptions{Ref: "r1"})
			require.NoError(t, err)
			assert.EqualValues(t, 1, first.Unread)
			retry, err := s.Send(ctx, conv, "alice", "hi", direct.SendOptions{Ref: "r1"})
			require.NoError(t, err)
			assert.True(t, retry.Repeated)
			assert.Equal(t, first.Message.ID, retry.Message.ID)
			_, err = s.Send(ctx, conv, "alice", "other", direct.SendOptions{Ref: "r1"})
			assert.ErrorIs(t, err, direct.ErrRefReused)
			second, err := s.Send(ctx, conv, "Alice", "there", direct.SendOptions{})
			require.NoError(t, err)
			assert.EqualValues(t, 2, second.Unread, "a retry is not counted twice")

			list, err := s.List(ctx, "BOB", 10)
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, "Alice", list[0].With)
			assert.EqualValues(t, 2, list[0].Unread)
			require.NotNil(t, list[0].Last)
			assert.Equal(t, "there", list[0].Last.Text)

			n, err := s.MarkRead(ctx, conv, "bob", first.Message.ID)
			require.NoError(t, err)
			assert.EqualValues(t, 1, n)
			n, err = s.MarkRead(ctx, conv, "bob", "0-1")
			require.NoError(t, err)
			assert.EqualValues(t, 1, n, "a read mark never goes back")
			_, err = s.MarkRead(ctx, conv, "carol", second.Message.ID)
			assert.ErrorIs(t, err, direct.ErrNoConversation)

			page, err := s.History(ctx, conv, first.Message.ID, 10)
			require.NoError(t, err)
			require.Len(t, page.Messages, 1)
			assert.Equal(t, second.Message.ID, page.Messages[0].ID)
			assert.Equal(t, "bob", page.Messages[0].To)
			assert.False(t, page.Gap)

			ok, err := s.Remove(ctx, conv, first.Message.ID)
			require.NoError(t, err)
			assert.True(t, ok)
			page, err = s.History(ctx, conv, "", 10)
			require.NoError(t, err)
			assert.Len(t, page.Messages, 1)
		})
	}
}

func TestDirectBlocksRefuseBothWaysAndSurviveCase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newDirect(t, redistest.Real(t), direct.Config{})
	require.NoError(t, s.Block(ctx, "Bob", "ALICE", direct.BlockOptions{}))
	_, _, err := s.Open(ctx, "alice", "bob", direct.OpenOptions{})
	assert.ErrorIs(t, err, direct.ErrBlocked)
	assert.Equal(t, errcode.Blocked, errcode.Of(err))
	assert.ErrorIs(t, s.CheckReach(ctx, "bob", "alice"), direct.ErrBlocked, "the blocker cannot write either")
	bl, err := s.Blocks(ctx, "bob")
	require.NoError(t, err)
	assert.Equal(t, []string{"alice"}, bl)
	require.NoError(t, s.Unblock(ctx, "BOB", "Alice"))
	_, _, err = s.Open(ctx, "alice", "bob", direct.OpenOptions{})
	assert.NoError(t, err)
}

func TestDirectOpenBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newDirect(t, redistest.Real(t), direct.Config{Opens: 2, OpensWindow: time.Hour})
	for _, to := range []string{"b1", "b2"} {
		_, _, err := s.Open(ctx, "al", to, direct.OpenOptions{})
		require.NoError(t, err)
	}
	_, _, err := s.Open(ctx, "al", "b3", direct.OpenOptions{})
	var rl *direct.RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Greater(t, rl.RetryAfter, time.Minute)
	_, _, err = s.Open(ctx, "al", "b1", direct.OpenOptions{})
	assert.NoError(t, err, "an existing conversation spends nothing")
}

func TestDirectGuestConversationExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := redistest.Real(t)
	s := newDirect(t, r, direct.Config{GuestTTL: time.Hour})
	conv, _, err := s.Open(ctx, "guest1", "bob", direct.OpenOptions{Guest: true})
	require.NoError(t, err)
	_, err = s.Send(ctx, conv, "bob", "hi", direct.SendOptions{})
	require.NoError(t, err)
	rdb := r.NewClient(t)
	keys, err := rdb.Keys(ctx, r.Prefix+":*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	for _, k := range keys {
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		assert.True(t, ttl > 0 && ttl <= time.Hour, "%s lives %v", k, ttl)
	}
}
