package seen

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
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
	DefaultTTL         = 30 * 24 * time.Hour
	DefaultGenerations = 2
)

// readWholePerItem is Filter.readWhole by default: a call of n items reads
// (and rewrites) bitmaps of up to n*4 KB whole, where copying the string
// costs less than the GETBIT (SETBIT) calls it saves.
const readWholePerItem = 4096

// maxSends bounds the sends of one call whose generations turn out to have
// other sizes than the ones sent (see geometry).
const maxSends = 3

// Config configures a Filter. Every node of a deployment must use the same
// Prefix and Generations.
type Config struct {
	// Prefix is the key prefix; "" means keyspace.DefaultPrefix.
	Prefix string
	// Capacity returns the live seen.capacity: the items a new generation is
	// sized for and counts before the next one starts. nil, or a value
	// below 1, means DefaultCapacity.
	Capacity func() int
	// FPRate returns the live seen.fp_rate: the false-positive rate a
	// user's filter keeps, all generations checked together. nil, or a value
	// outside (0, 1), means DefaultFPRate.
	FPRate func() float64
	// TTL is how long a generation lives after its last write; 0 means
	// DefaultTTL.
	TTL time.Duration
	// Generations is how many generations are kept per user; 0 means
	// DefaultGenerations. Changing it forgets part of what users have seen.
	Generations int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Registerer receives the Filter's metrics (chatd_seen_*); nil means not
	// registered. Filters may share one.
	Registerer prometheus.Registerer
}

// Filter answers, for any user, which items that user has already seen. It
// is safe for concurrent use; it keeps no state of its own, so every node
// may use its own Filter on the same Redis.
type Filter struct {
	rdb         redis.Scripter
	space       keyspace.Space
	capacity    func() int
	fpRate      func() float64
	ttl         time.Duration
	generations int
	metrics     *metrics
	now         func() time.Time

	mu      sync.Mutex
	learned []learned // sizes of older generations, sent along for a while
	// readWhole is the bitmap size, in bytes per item of a call, up to
	// which a script reads (and rewrites) a generation's bitmap whole
	// instead of calling GETBIT (SETBIT) per bit.
	readWhole int
}

// New returns a Filter whose bits live in rdb. It panics when
// cfg.Generations is negative or cfg.Registerer refuses the metrics.
func New(rdb redis.UniversalClient, cfg Config) *Filter {
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
		now:         cfg.Now,
	}
	if f.now == nil {
		f.now = time.Now
	}
	if f.ttl <= 0 {
		f.ttl = DefaultTTL
	}
	if f.generations == 0 {
		f.generations = DefaultGenerations
	}
	return f
}

// Mark records that user has seen items. Marking an item again is harmless;
// it also keeps the item through the next rotation. When the user's current
// generation has counted its capacity, a new one sized by the live settings
// starts and the oldest kept one is dropped. Mark returns ErrTooManyItems,
// ErrBadItem or names.ErrBadName (wrapped) for bad input, ErrResized, or the
// Redis error.
func (f *Filter) Mark(ctx context.Context, user string, items []string) error {
	if err := check(user, items); err != nil {
		return fmt.Errorf("seen: mark: %w", err)
	}
	if len(items) == 0 {
		return nil
	}
	g, capacity, err := f.sizing()
	if err != nil {
		return fmt.Errorf("seen: mark %s: %w", user, err)
	}
	start := time.Now()
	defer func() { f.metrics.calls.WithLabelValues("mark").Observe(time.Since(start).Seconds()) }()
	geoms := f.sizes(g)
	keys := userKeys(f.space, user, f.generations)
	for range maxSends {
		args := positions(items, geoms, f.ttl.Milliseconds(), capacity, f.readWhole*len(items))
		res, err := markScript.Run(ctx, f.rdb, keys, args...).Slice()
		if err != nil {
			return fmt.Errorf("seen: mark %s: %w", user, err)
		}
		missing, err := reply(res)
		if err != nil {
			return fmt.Errorf("seen: mark %s: %w", user, err)
		}
		if missing == nil {
			f.metrics.marked.Add(float64(len(items)))
			rotations, _ := res[1].(int64)
			f.metrics.rotations.Add(float64(rotations))
			return nil
		}
		f.metrics.resends.Inc()
		f.learn(missing)
		geoms = merge(geoms, missing)
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
	g, _, err := f.sizing()
	if err != nil {
		return nil, fmt.Errorf("seen: check %s: %w", user, err)
	}
	start := time.Now()
	defer func() { f.metrics.calls.WithLabelValues("check").Observe(time.Since(start).Seconds()) }()
	geoms := f.sizes(g)
	keys := userKeys(f.space, user, f.generations)
	for range maxSends {
		args := positions(items, geoms, f.readWhole*len(items))
		res, err := checkScript.Run(ctx, f.rdb, keys, args...).Slice()
		if err != nil {
			return nil, fmt.Errorf("seen: check %s: %w", user, err)
		}
		missing, err := reply(res)
		if err != nil {
			return nil, fmt.Errorf("seen: check %s: %w", user, err)
		}
		if missing != nil {
			f.metrics.resends.Inc()
			f.learn(missing)
			geoms = merge(geoms, missing)
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

// geometry is the shape of one bloom filter: m bits, k hashes. An item's
// bits in it are those of bloom.New(m, k): bloom.Locations(item, k), each
// modulo m.
type geometry struct {
	m, k uint
}

// maxBits is the most bits a Redis string holds (512 MB).
const maxBits = 1 << 32

// sizing returns the geometry and capacity of a generation started now, from
// the live settings. Each generation gets the false-positive rate p' with
// 1-(1-p')^G = p, so that G full generations checked together still answer
// wrongly at most at rate p.
func (f *Filter) sizing() (geometry, int, error) {
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
	m, k := bloom.EstimateParameters(uint(capacity), generationFP(p, f.generations))
	if m >= maxBits {
		return geometry{}, 0, fmt.Errorf("capacity %d at rate %g needs %d bits, more than a Redis string holds", capacity, p, m)
	}
	return geometry{m: m, k: k}, capacity, nil
}

// generationFP returns the false-positive rate of one of g generations such
// that all g together have rate p.
func generationFP(p float64, g int) float64 {
	return -math.Expm1(math.Log1p(-p) / float64(g))
}

// positions returns head followed by the scripts' item arguments: the
// number of items and of geometries, then for each geometry m, k and the k
// bit positions of each item packed 4 bytes big-endian (positions are below
// 2^32, and Lua reads 4 bytes faster than it parses a decimal number).
func positions(items []string, geoms []geometry, head ...any) []any {
	var kmax uint
	for _, g := range geoms {
		kmax = max(kmax, g.k)
	}
	locs := make([][]uint64, len(items))
	for i, it := range items {
		locs[i] = bloom.Locations([]byte(it), kmax)
	}
	args := make([]any, 0, len(head)+2+3*len(geoms))
	args = append(args, head...)
	args = append(args, len(items), len(geoms))
	for _, g := range geoms {
		m := uint64(g.m)
		packed := make([]byte, 0, 4*int(g.k)*len(items))
		for _, l := range locs {
			for _, x := range l[:g.k] {
				packed = binary.BigEndian.AppendUint32(packed, uint32(x%m))
			}
		}
		args = append(args, g.m, g.k, packed)
	}
	return args
}

// reply reads the status of a script reply: nil when the call was done, or
// the geometries of generations the call did not send positions for.
func reply(res []any) ([]geometry, error) {
	if len(res) < 2 {
		return nil, fmt.Errorf("unexpected reply %v", res)
	}
	if status, _ := res[0].(int64); status == 1 {
		return nil, nil
	}
	if len(res)%2 != 1 {
		return nil, fmt.Errorf("unexpected reply %v", res)
	}
	out := make([]geometry, 0, len(res)/2)
	for i := 1; i < len(res); i += 2 {
		m, err1 := toUint(res[i])
		k, err2 := toUint(res[i+1])
		if err1 != nil || err2 != nil || m < 1 || m >= maxBits || k < 1 || k > 64 {
			return nil, fmt.Errorf("corrupt generation size m=%v k=%v", res[i], res[i+1])
		}
		out = append(out, geometry{m: m, k: k})
	}
	return out, nil
}

// learned is a generation size some user's generations had that the live
// settings do not give, kept until `until`.
type learned struct {
	g     geometry
	until time.Time
}

// Limits of the sizes a Filter learns.
const (
	learnFor   = 10 * time.Minute
	maxLearned = 4
)

// sizes returns the generation sizes to send positions for: current, then
// the sizes learned in the last learnFor. After a settings change most users'
// generations keep the old size for a while; sending it along saves each call
// the second round trip.
func (f *Filter) sizes(current geometry) []geometry {
	now := f.now()
	out := []geometry{current}
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.learned[:0]
	for _, l := range f.learned {
		if now.Before(l.until) {
			kept = append(kept, l)
			out = merge(out, []geometry{l.g})
		}
	}
	f.learned = kept
	return out
}

// learn remembers sizes a script asked for, the most recent first.
func (f *Filter) learn(gs []geometry) {
	until := f.now().Add(learnFor)
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, g := range gs {
		f.learned = slices.DeleteFunc(f.learned, func(l learned) bool { return l.g == g })
		f.learned = slices.Insert(f.learned, 0, learned{g: g, until: until})
	}
	if len(f.learned) > maxLearned {
		f.learned = f.learned[:maxLearned]
	}
}

// merge adds to geoms those of more it lacks.
func merge(geoms, more []geometry) []geometry {
	for _, g := range more {
		found := false
		for _, h := range geoms {
			found = found || g == h
		}
		if !found {
			geoms = append(geoms, g)
		}
	}
	return geoms
}

func toUint(v any) (uint, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, fmt.Errorf("negative %d", x)
		}
		return uint(x), nil
	case string:
		u, err := strconv.ParseUint(x, 10, 64)
		return uint(u), err
	}
	return 0, fmt.Errorf("unexpected %T", v)
}
