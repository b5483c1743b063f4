package direct

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// MaxBlocks is how many users one user may block.
const MaxBlocks = 1000

// BlockOptions are Block's options.
type BlockOptions struct {
	// Guest: the blocker is a guest (its blocks live GuestTTL after the
	// last change; a registered user's Config.BlocksTTL, a year).
	Guest bool
}

// Block makes user block target (both by canonical name, so the block
// outlives sessions and case): neither can open or write to their
// conversation, and target cannot invite user to a party, until Unblock;
// and target's messages and typing in the rooms they share are kept from
// user. The set after the change is published to user's connections on
// every node (NodeEventBlocks), in the order of the changes. It returns
// names.ErrBadName, ErrSelf, ErrTooManyBlocks (MaxBlocks) and Redis
// errors.
func (s *Service) Block(ctx context.Context, user, target string, o BlockOptions) error {
	if err := names.User(target); err != nil {
		return err
	}
	if names.Canonical(user) == names.Canonical(target) {
		return ErrSelf
	}
	ttl := s.cfg.BlocksTTL
	if o.Guest {
		ttl = s.cfg.GuestTTL
	}
	n, err := s.changeBlocks(ctx, "add", user, target, ttl)
	if err != nil {
		return fmt.Errorf("direct: %s blocks %s: %w", user, target, err)
	}
	if n < 0 {
		return fmt.Errorf("%w: %d blocks; unblock someone first", ErrTooManyBlocks, MaxBlocks)
	}
	return nil
}

// Unblock lifts user's block of target; lifting no block is no error. The
// set after it is published as Block's is. It returns names.ErrBadName
// and Redis errors.
func (s *Service) Unblock(ctx context.Context, user, target string) error {
	if err := names.User(target); err != nil {
		return err
	}
	if _, err := s.changeBlocks(ctx, "remove", user, target, 0); err != nil {
		return fmt.Errorf("direct: %s unblocks %s: %w", user, target, err)
	}
	return nil
}

// blocksEventHead is the blocks event's JSON up to its list of names.
var blocksEventHead = `{"type":"` + NodeEventBlocks + `","blocks":`

// changeBlocks runs blocks_change.lua: op ("add" or "remove") target in
// user's set, which then lives ttl (add), and publishes the set. It
// returns the set's size after, or -1 when an add would pass MaxBlocks.
func (s *Service) changeBlocks(ctx context.Context, op, user, target string, ttl time.Duration) (int64, error) {
	u := names.Canonical(user)
	return redisx.Run(ctx, s.rdb, blocksChangeScript, []string{blocksKey(s.ks, u)},
		op, names.Canonical(target), ttl.Milliseconds(), MaxBlocks, s.ch, envelope([]string{u}, ""), blocksEventHead).Int64()
}

// DecodeBlocks returns the names of a blocks event frame (NodeEventBlocks).
func DecodeBlocks(frame []byte) ([]string, error) {
	var ev struct {
		Type   string   `json:"type"`
		Blocks []string `json:"blocks"`
	}
	if err := json.Unmarshal(frame, &ev); err != nil {
		return nil, fmt.Errorf("direct: blocks event: %w", err)
	}
	if ev.Type != NodeEventBlocks {
		return nil, fmt.Errorf("direct: blocks event of type %q", ev.Type)
	}
	return ev.Blocks, nil
}

// Blocks returns the canonical names user blocks, sorted. It returns
// Redis errors.
func (s *Service) Blocks(ctx context.Context, user string) ([]string, error) {
	v, err := s.rdb.SMembers(ctx, blocksKey(s.ks, names.Canonical(user))).Result()
	if err != nil {
		return nil, fmt.Errorf("direct: blocks of %s: %w", user, err)
	}
	sort.Strings(v)
	return v, nil
}

// Blocking reports whether user blocks other. It returns Redis errors.
func (s *Service) Blocking(ctx context.Context, user, other string) (bool, error) {
	ok, err := s.rdb.SIsMember(ctx, blocksKey(s.ks, names.Canonical(user)), names.Canonical(other)).Result()
	if err != nil {
		return false, fmt.Errorf("direct: blocks of %s: %w", user, err)
	}
	return ok, nil
}

// CheckReach returns ErrBlocked when from and to may not reach each other:
// either blocks the other. Two SISMEMBER in one round trip (each user's
// set is in its own slot). It returns Redis errors.
func (s *Service) CheckReach(ctx context.Context, from, to string) error {
	var ab, ba *redis.BoolCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		ab = p.SIsMember(ctx, blocksKey(s.ks, names.Canonical(from)), names.Canonical(to))
		ba = p.SIsMember(ctx, blocksKey(s.ks, names.Canonical(to)), names.Canonical(from))
		return nil
	})
	if err != nil {
		return fmt.Errorf("direct: blocks of %s and %s: %w", from, to, err)
	}
	switch {
	case ba.Val():
		return fmt.Errorf("%w: %s does not take messages or invitations from you", ErrBlocked, to)
	case ab.Val():
		return fmt.Errorf("%w: you block %s; unblock them first", ErrBlocked, to)
	}
	return nil
}
