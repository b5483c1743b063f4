package seen

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Defaults of Config.
const (
	DefaultCapacity    = 10000
	DefaultFPRate      = 0.01
	DefaultTTL         = 7 * 24 * time.Hour
	DefaultGenerations = 2
)

// growingSlots is how many growing generations a filter may keep besides
// its Generations full-size ones: at least the number of growing sizes at
// the largest seen.capacity (10,000,000 = 128·4^8.2: nine).
const growingSlots = 10

// readWholePerItem is Filter.readWhole by default: a call of n items reads
// (and rewrites) bitmaps of up to n*4 KB whole, where copying the string
// costs less than the GETBIT (SETBIT) calls it saves.
const readWholePerItem = 4096

// maxSends bounds the sends of one call whose generations turn out to need
// more hash values than were sent (see Filter.moreK).
const maxSends = 3

// Config configures a Filter. Every node of a deployment must use the same
// Prefix and Generations.
type Config struct {
	// Prefix is the key prefix; "" means keyspace.DefaultPrefix.
	Prefix string
	// Capacity returns the live seen.capacity: the items a full-size
	// generation holds. A user's first generation holds FirstCapacity
	// items and each next one Growth times more, up to Capacity. nil, or a
	// value below 1, means DefaultCapacity.
	Capacity func() int
	// FPRate returns the live seen.fp_rate: the false-positive rate a
	// user's filter keeps, all kept generations checked together. nil, or a
	// value outside (0, 1), means DefaultFPRate.
	FPRate func() float64
	// TTL returns how long a user's filter lives after the user's last
	// Mark (every key of it is refreshed by each Mark). nil, or a value
	// below one millisecond, means DefaultTTL.
	TTL func() time.Duration
	// Generations is how many full-size generations are kept per user; 0
	// means DefaultGenerations. A filter remembers at least the last
	// (Generations-1)·Capacity items besides those of its newest
	// generation. Changing it forgets what users have seen.
	Generations int
	// Registerer receives the Filter's metrics (chatd_seen_*); nil means not
	// registered. Filters may share one.
	Registerer prometheus.Registerer
}

// Filter answers, for any user, which items that user has already seen. It
// is safe for concurrent use; it keeps no state of its own beyond a hint,
// so every node may use its own Filter on the same Redis.
type Filter struct {
	rdb         redis.Scripter
	space       keyspace.Space
	capacity    func() int
	fpRate      func() float64
	ttl         func() time.Duration
	generations int
	slots       int
	metrics     *metrics

	// moreK is the most hashes a script asked for beyond the live plan's
	// (generations made under older settings); sent from then on.
	moreK atomic.Uint32
	// readWhole is the bitmap size, in bytes per item of a call, up to
	// which a script reads (and rewrites) a generation's bitmap whole
	// instead of calling GETBIT (SETBIT) per bit.
	readWhole int
}

// New returns a Filter whose bits live in rdb. It panics when
// cfg.Generations is negative or cfg.Registerer refuses the metrics.
func New(rdb redis.Scripter, cfg Config) *Filter {
	if cfg.Generations < 0 {
		panic("seen: negative Config.Generations")
	}
	f := &Filter{
		rdb:         rdb,
		space:       keyspace.New(cfg.Prefix),
		capacity:    cfg.Capacity,
		fpRate:      cfg.FPRate,
		ttl:         cfg.TTL,
		generations: cfg.Generations,
		metrics:     newMetrics(cfg.Registerer),
		readWhole:   readWholePerItem,
	}
	if f.generations == 0 {
		f.generations = DefaultGenerations
	}
	f.slots = growingSlots + f.generations
	return f
}

// TTL returns the lifetime of a filter after its last Mark in force now.
func (f *Filter) TTL() time.Duration {
	if f.ttl != nil {
		if d := f.ttl(); d >= time.Millisecond {
			return d
		}
	}
	return DefaultTTL
}

// Mark records that user has seen items. Marking an item again is harmless;
// it also keeps the item through the next rotation. When the user's newest
// generation has counted its capacity, a new, larger one (sized by the live
// settings) starts and the oldest ones the filter no longer needs are
// dropped. Every key of the user's filter then lives TTL from now. Mark
// returns ErrTooManyItems, ErrBadItem or names.ErrBadName (wrapped) for bad
// input, ErrResized, or the Redis error.
func (f *Filter) Mark(ctx context.Context, user string, items []string) error {
	return f.MarkFor(ctx, user, items, 0)
}

// MarkFor is Mark with the user's filter living at most ttl from now:
// when ttl is positive and shorter than TTL, every key of the filter then
// lives ttl instead of TTL. The realtime core uses it for a guest (24 h),
// so that the filter of a guest who never comes back goes within a day.
// It returns the errors of Mark.
func (f *Filter) MarkFor(ctx context.Context, user string, items []string, ttl time.Duration) error {
	if err := check(user, items); err != nil {
		return fmt.Errorf("seen: mark: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	pl, err := f.plan()
	if err != nil {
		return fmt.Errorf("seen: mark %s: %w", user, err)
	}
	start := time.Now()
	defer func() { f.metrics.calls.WithLabelValues("mark").Observe(time.Since(start).Seconds()) }()
	keys := userKeys(f.space, user, f.slots)
	k := f.hashes(pl)
	life := f.TTL()
	if ttl > 0 && ttl < life {
		life = max(time.Millisecond, ttl)
	}
	for range maxSends {
		args := make([]any, 0, 7+3*len(pl.sizes))
		args = append(args, life.Milliseconds(), pl.keep, f.readWhole*len(items), len(items), k, len(pl.sizes))
		for _, s := range pl.sizes {
			args = append(args, s.m, s.k, s.c)
		}
		args = append(args, hashValues(items, k))
		res, err := markScript.Run(ctx, f.rdb, keys, args...).Int64Slice()
		if err != nil {
			return fmt.Errorf("seen: mark %s: %w", user, err)
		}
		if len(res) != 2 {
			return fmt.Errorf("seen: mark %s: unexpected reply %v", user, res)
		}
		if res[0] == 1 {
			f.metrics.marked.Add(float64(len(items)))
			f.metrics.rotations.Add(float64(res[1]))
			return nil
		}
		if k, err = f.needK(res[1], k); err != nil {
			return fmt.Errorf("seen: mark %s: %w", user, err)
		}
	}
	return fmt.Errorf("seen: mark %s: %w", user, ErrResized)
}

// Seen reports, for each of items in order, whether user may have seen it:
// false is certain (the item was never marked, or was forgotten with a
// dropped or expired generation); true is wrong for an item never marked at
// most at the configured false-positive rate. It returns ErrTooManyItems,
// ErrBadItem or names.ErrBadName (wrapped) for bad input, ErrResized, or the
// Redis error.
func (f *Filter) Seen(ctx context.Context, user string, items []string) ([]bool, error) {
	if err := check(user, items); err != nil {
		return nil, fmt.Errorf("seen: check: %w", err)
	}
	if len(items) == 0 {
		return []bool{}, nil
	}
	pl, err := f.plan()
	if err != nil {
		return nil, fmt.Errorf("seen: check %s: %w", user, err)
	}
	start := time.Now()
	defer func() { f.metrics.calls.WithLabelValues("check").Observe(time.Since(start).Seconds()) }()
	keys := userKeys(f.space, user, f.slots)
	k := f.hashes(pl)
	for range maxSends {
		res, err := checkScript.Run(ctx, f.rdb, keys, f.readWhole*len(items), len(items), k, hashValues(items, k)).Slice()
		if err != nil {
			return nil, fmt.Errorf("seen: check %s: %w", user, err)
		}
		if len(res) != 2 {
			return nil, fmt.Errorf("seen: check %s: unexpected reply %v", user, res)
		}
		if status, _ := res[0].(int64); status != 1 {
			need, _ := res[1].(int64)
			if k, err = f.needK(need, k); err != nil {
				return nil, fmt.Errorf("seen: check %s: %w", user, err)
			}
			continue
		}
		flags, ok := res[1].(string)
		if !ok || len(flags) != len(items) {
			return nil, fmt.Errorf("seen: check %s: unexpected reply %v", user, res)
		}
		out := make([]bool, len(items))
		held := 0
		for i := range out {
			out[i] = flags[i] == '1'
			if out[i] {
				held++
			}
		}
		f.metrics.checked.Add(float64(len(items)))
		f.metrics.maybeSeen.Add(float64(held))
		return out, nil
	}
	return nil, fmt.Errorf("seen: check %s: %w", user, ErrResized)
}

// Unseen returns the items user has certainly not seen, in the order given
// (duplicates kept). A marked item is never returned; an unmarked one is
// wrongly held back at most at the configured false-positive rate. It
// returns the errors of Seen.
func (f *Filter) Unseen(ctx context.Context, user string, items []string) ([]string, error) {
	seen, err := f.Seen(ctx, user, items)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for i, s := range seen {
		if !s {
			out = append(out, items[i])
		}
	}
	return out, nil
}

// check validates the input of a call.
func check(user string, items []string) error {
	if err := names.User(user); err != nil {
		return err
	}
	if len(items) > MaxItems {
		return fmt.Errorf("%w: %d items, at most %d", ErrTooManyItems, len(items), MaxItems)
	}
	for i, it := range items {
		if it == "" || len(it) > MaxItemLen {
			return fmt.Errorf("%w: item %d has %d bytes, want 1..%d", ErrBadItem, i, len(it), MaxItemLen)
		}
	}
	return nil
}

// plan returns the generation sizes of the live settings.
func (f *Filter) plan() (plan, error) {
	capacity := DefaultCapacity
	if f.capacity != nil {
		if c := f.capacity(); c >= 1 {
			capacity = c
		}
	}
	p := DefaultFPRate
	if f.fpRate != nil {
		if v := f.fpRate(); v > 0 && v < 1 {
			p = v
		}
	}
	return newPlan(capacity, p, f.generations)
}

// hashes returns how many hash values to send per item: enough for every
// size of the plan and for the older sizes scripts asked for.
func (f *Filter) hashes(pl plan) uint {
	return max(pl.k, uint(f.moreK.Load()))
}

// needK handles a script's answer that a kept generation has need hashes,
// more than the sent: it returns the hashes to send again, and remembers
// them for later calls (a generation made under other settings lives on
// until it is dropped or expires).
func (f *Filter) needK(need int64, sent uint) (uint, error) {
	if need <= int64(sent) || need > 64 {
		return 0, fmt.Errorf("corrupt generation: %d hashes (sent %d)", need, sent)
	}
	f.metrics.resends.Inc()
	for {
		old := f.moreK.Load()
		if uint32(need) <= old || f.moreK.CompareAndSwap(old, uint32(need)) {
			break
		}
	}
	return uint(need), nil
}

// hashValues returns the first k bloom/v3 hash values of each item (those
// of bloom.Locations, before the modulo) packed 8 bytes big-endian, item
// after item. The scripts take each modulo the m of each generation.
func hashValues(items []string, k uint) []byte {
	out := make([]byte, 0, 8*int(k)*len(items))
	for _, it := range items {
		for _, h := range bloom.Locations([]byte(it), k) {
			out = binary.BigEndian.AppendUint64(out, h)
		}
	}
	return out
}
