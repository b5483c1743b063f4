package dirty

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/names"
)

// Cursor returns the session's last delivered message id for each of rooms
// that has one (a room without one is absent from the map), in one round
// trip. It returns an error wrapping ErrBadID for a bad session id.
func (t *Tracker) Cursor(ctx context.Context, session string, rooms []string) (map[string]string, error) {
	if err := checkID("session", session); err != nil {
		return nil, fmt.Errorf("dirty: cursor: %w", err)
	}
	out := make(map[string]string, len(rooms))
	if len(rooms) == 0 {
		return out, nil
	}
	vals, err := t.rdb.HMGet(ctx, t.k.cursor(session), rooms...).Result()
	if err != nil {
		return nil, fmt.Errorf("dirty: cursor %s: %w", session, err)
	}
	for i, v := range vals {
		if s, ok := v.(string); ok {
			out[rooms[i]] = s
		}
	}
	return out, nil
}

// SetCursor records the session's last delivered message id per room, for
// as long as the session lives: one round trip. It returns an error wrapping
// ErrBadID for a bad session id.
func (t *Tracker) SetCursor(ctx context.Context, session string, cur map[string]string) error {
	if err := checkID("session", session); err != nil {
		return fmt.Errorf("dirty: set cursor: %w", err)
	}
	if len(cur) == 0 {
		return nil
	}
	key := t.k.cursor(session)
	_, err := t.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.HSet(ctx, key, cur)
		pipe.PExpire(ctx, key, t.ttl)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dirty: set cursor %s: %w", session, err)
	}
	return nil
}

// Follow makes user a follower of topic (say a board the user posted to) for
// Config.FollowTTL: MarkFollowers then reaches the user's sessions. It returns
// an error wrapping ErrBadID or names.ErrBadName for bad input.
func (t *Tracker) Follow(ctx context.Context, topic, user string) error {
	if err := checkID("topic", topic); err != nil {
		return fmt.Errorf("dirty: follow: %w", err)
	}
	if err := names.User(user); err != nil {
		return fmt.Errorf("dirty: follow: %w", err)
	}
	key := t.k.followers(topic)
	_, err := t.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.SAdd(ctx, key, user)
		pipe.PExpire(ctx, key, t.follow)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dirty: follow %s: %w", topic, err)
	}
	// The user's own index of what it follows (Following), in the user's
	// slot: a second transaction, since one can't span two slots.
	follows := t.k.follows(user)
	_, err = t.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		pipe.ZAdd(ctx, follows, redis.Z{Score: float64(t.now().Add(t.follow).UnixMilli()), Member: topic})
		pipe.PExpire(ctx, follows, t.follow)
		return nil
	})
	if err != nil {
		return fmt.Errorf("dirty: follow %s: %w", topic, err)
	}
	return nil
}

// MarkFollowers makes bits dirty in every live session of topic's
// followers: three round trips (the followers, their sessions, the marks).
// It returns an error wrapping ErrBadID for a bad topic.
func (t *Tracker) MarkFollowers(ctx context.Context, topic string, bits Mask) error {
	if err := checkID("topic", topic); err != nil {
		return fmt.Errorf("dirty: mark followers: %w", err)
	}
	if bits == 0 {
		return nil
	}
	users, err := t.rdb.SMembers(ctx, t.k.followers(topic)).Result()
	if err != nil {
		return fmt.Errorf("dirty: mark followers of %s: %w", topic, err)
	}
	valid := users[:0]
	for _, u := range users {
		if names.User(u) == nil {
			valid = append(valid, u)
		}
	}
	if err := t.MarkUsers(ctx, valid, bits); err != nil {
		return fmt.Errorf("dirty: mark followers of %s: %w", topic, err)
	}
	return nil
}
