package dirty

import (
	"context"
	"fmt"
	"sort"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/names"
)

// Cursors returns every room of the session's cursor with its last
// delivered message id: the rooms a REST session is in. One round trip.
// It returns an error wrapping ErrBadID for a bad session id.
func (t *Tracker) Cursors(ctx context.Context, session string) (map[string]string, error) {
	if err := checkID("session", session); err != nil {
		return nil, fmt.Errorf("dirty: cursors: %w", err)
	}
	cur, err := t.rdb.HGetAll(ctx, t.k.cursor(session)).Result()
	if err != nil {
		return nil, fmt.Errorf("dirty: cursors %s: %w", session, err)
	}
	return cur, nil
}

// DropCursor removes room from the session's cursor (the session left it).
// It returns an error wrapping ErrBadID for a bad session id.
func (t *Tracker) DropCursor(ctx context.Context, session, room string) error {
	if err := checkID("session", session); err != nil {
		return fmt.Errorf("dirty: drop cursor: %w", err)
	}
	if err := t.rdb.HDel(ctx, t.k.cursor(session), room).Err(); err != nil {
		return fmt.Errorf("dirty: drop cursor %s: %w", session, err)
	}
	return nil
}

// Following returns the topics user follows (see Follow), sorted.
// It returns an error wrapping names.ErrBadName for a bad user name.
func (t *Tracker) Following(ctx context.Context, user string) ([]string, error) {
	if err := names.User(user); err != nil {
		return nil, fmt.Errorf("dirty: following: %w", err)
	}
	now := t.now().UnixMilli()
	topics, err := t.rdb.ZRangeByScore(ctx, t.k.follows(user), &redis.ZRangeBy{Min: fmt.Sprint(now), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("dirty: following %s: %w", user, err)
	}
	sort.Strings(topics)
	return topics, nil
}
