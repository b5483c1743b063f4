package dirty

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
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
// Config.FollowTTL: MarkFollowers then reaches the user's sessions. A user
// follows at most Config.MaxFollows topics: a Follow past the cap drops the
// topics followed longest ago, and the user from their followers.
//
// One pipelined round trip when nothing is dropped: a script adds the user
// to the topic's followers SET and refreshes its TTL ({topic:T} slot), and
// a script adds the topic to the user's follows ZSET, refreshes its TTL and
// trims it to the cap ({user:U} slot); one more round trip SREMs the user
// from each dropped topic's followers. The two slots cannot share a
// transaction, so a failure may leave them apart, each side still bounded
// by its TTL: with the followers side missed, the topic is listed by
// Following but its changes do not mark the user; with the follows side
// missed, the user is marked but the topic is not listed and never dropped
// by the cap, until the followers SET lapses FollowTTL after the topic's
// last Follow; with the SREM missed, a dropped topic still marks the user
// until that SET lapses. Follow is idempotent: a retry (the next post)
// repairs the first two.
//
// It returns an error wrapping ErrBadID or names.ErrBadName for bad input,
// or the Redis error.
func (t *Tracker) Follow(ctx context.Context, topic, user string) error {
	return t.FollowFor(ctx, topic, user, 0)
}

// FollowFor is Follow for at most ttl: when ttl is positive and shorter
// than Config.FollowTTL, the follow and the user's follows index live ttl,
// and topic's followers set lives at least ttl but keeps a longer expiry
// (the follow never shortens other users' follows). The realtime core
// uses it for a guest (24 h), so that what a guest who never comes back
// follows goes within a day. It returns the errors of Follow.
func (t *Tracker) FollowFor(ctx context.Context, topic, user string, ttl time.Duration) error {
	if err := checkID("topic", topic); err != nil {
		return fmt.Errorf("dirty: follow: %w", err)
	}
	if err := names.User(user); err != nil {
		return fmt.Errorf("dirty: follow: %w", err)
	}
	now := t.now()
	life, lengthenOnly := t.follow, "0"
	if ttl > 0 && ttl < t.follow {
		life, lengthenOnly = ttl, "1"
	}
	ms := max(1, life.Milliseconds())
	var index *redis.Cmd
	err := redisx.Pipelined(ctx, t.rdb, func(p *redisx.Pipe) {
		p.Script(followersScript, []string{t.k.followers(topic)}, user, ms, lengthenOnly)
		index = p.Script(indexScript, []string{t.k.follows(user)}, now.UnixMilli(), now.Add(life).UnixMilli(), ms, t.maxFol, topic)
	})
	if err != nil {
		return fmt.Errorf("dirty: follow %s: %w", topic, err)
	}
	dropped := stringsOf(index.Val())
	if len(dropped) == 0 {
		return nil
	}
	t.metrics.droppedFollows.Add(float64(len(dropped)))
	_, err = t.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, d := range dropped {
			if checkID("topic", d) == nil {
				pipe.SRem(ctx, t.k.followers(d), user)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("dirty: follow %s: unfollow %d dropped topics: %w", topic, len(dropped), err)
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
