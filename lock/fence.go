package lock

import (
	"context"
	"fmt"
)

// FencedHSet sets fields of the hash key — as HSET key field value [field
// value ...] — only if no fence newer than fence was issued for the lock
// name, checked in the same script as the write. values are field-value
// pairs, or a single map[string]any or map[string]string.
//
// key must carry the name's hash tag ({kind:id}, see Keys), else
// ErrKeyNotInUnit. It returns ErrFenceStale, writing nothing, when someone
// acquired the lock after the fence's holder; names.ErrBadName for a
// malformed name; ErrNoAnswer when Redis did not answer before ctx ended;
// other Redis errors wrapped with the name. The write is not refused merely
// because the holder's lock expired: only a newer holder makes it stale.
func (c *Client) FencedHSet(ctx context.Context, name string, fence int64, key string, values ...any) error {
	kind, id, err := checkName(name)
	if err != nil {
		return fmt.Errorf("lock: fenced hset: %w", err)
	}
	if hashTag(key) != name {
		return fmt.Errorf("lock: fenced hset %s: %w: %q", name, ErrKeyNotInUnit, key)
	}
	args, err := hsetArgs(fence, values)
	if err != nil {
		return fmt.Errorf("lock: fenced hset %s: %w", name, err)
	}
	v, err := c.call(ctx, fenceHSetScript, nil, []string{c.fenceKey(kind, id), key}, args...)
	if err != nil {
		if err == errAbandoned {
			return fmt.Errorf("lock: fenced hset %s: %w before the context ended: %w", name, ErrNoAnswer, ctx.Err())
		}
		return fmt.Errorf("lock: fenced hset %s: %w", name, err)
	}
	if v.(int64) < 0 {
		return fmt.Errorf("lock: fenced hset %s (fence %d): %w", name, fence, ErrFenceStale)
	}
	return nil
}

// hsetArgs returns the script's ARGV: the fence, then field, value pairs.
func hsetArgs(fence int64, values []any) ([]any, error) {
	if len(values) == 1 {
		switch m := values[0].(type) {
		case map[string]any:
			args := make([]any, 0, 1+2*len(m))
			args = append(args, fence)
			for k, v := range m {
				args = append(args, k, v)
			}
			return args, nil
		case map[string]string:
			args := make([]any, 0, 1+2*len(m))
			args = append(args, fence)
			for k, v := range m {
				args = append(args, k, v)
			}
			return args, nil
		}
	}
	if len(values) == 0 || len(values)%2 != 0 {
		return nil, fmt.Errorf("want field, value pairs or one map, got %d values", len(values))
	}
	return append(append(make([]any, 0, 1+len(values)), fence), values...), nil
}
