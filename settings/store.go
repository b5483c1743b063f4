package settings

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/internal/keyspace"
)

// Subscriber is the part of the node's bus the Store needs.
type Subscriber interface {
	// Subscribe returns once Redis confirmed the subscription.
	Subscribe(ctx context.Context, channel string, h bus.Handler) (*bus.Subscription, error)
}

var _ Subscriber = (*bus.Bus)(nil)

// Config configures a Store. The zero value is usable.
type Config struct {
	// Prefix is the key prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// Logger receives reloads, gaps and refused stored values; nil =
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the store's metrics; nil = not registered.
	Registerer prometheus.Registerer
	// Resync is how often a started Store re-reads the snapshot even when
	// nothing looked wrong (it catches a Redis that lost its data while
	// nobody wrote); 0 = one minute, negative = never.
	Resync time.Duration
}

// Change is one applied change of a setting, as watchers see it.
type Change struct {
	// Key is the setting.
	Key string
	// Value is the value now in force (the default after a delete): an
	// int, a float64 or a string, after the setting's type.
	Value any
	// Version is the settings version that made the change.
	Version int64
	// Op is "set" or "delete" (back to the default).
	Op string
}

// Store is a node's copy of the live settings. Reads are lock-free; writes
// go to Redis and reach every node's Store through pub/sub.
type Store struct {
	rdb     redis.UniversalClient
	keys    keys
	log     *slog.Logger
	resync  time.Duration
	metrics metrics

	cur atomic.Pointer[state] // what reads see; replaced, never mutated

	mu          sync.Mutex       // orders every change of cur and the fields below
	keyVer      map[string]int64 // version each key's value in cur is as of
	streamVer   int64            // highest version seen on the channel or in a snapshot
	snapshotted bool             // a snapshot was applied: gap checks are on

	reloadCh chan struct{} // a pending reload request; capacity 1

	wmu      sync.Mutex
	watchers map[uint64]*watcher
	nextID   uint64
	queue    []Change      // applied changes not yet given to watchers
	queued   chan struct{} // capacity 1: queue is not empty

	started bool // guarded by mu
	sub     *bus.Subscription
	stop    context.CancelFunc
	done    sync.WaitGroup
}

// state is an immutable snapshot of every setting's value.
type state struct {
	version int64
	values  map[string]any // every registry key; defaults filled in
}

// New returns a Store holding the defaults at version 0. Writes work at
// once; call Start to follow the settings in Redis.
func New(rdb redis.UniversalClient, cfg Config) *Store {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Resync == 0 {
		cfg.Resync = time.Minute
	}
	s := &Store{
		rdb:      rdb,
		keys:     keys{keyspace.New(cfg.Prefix)},
		log:      cfg.Logger.With("component", "settings"),
		resync:   cfg.Resync,
		metrics:  newMetrics(cfg.Registerer),
		keyVer:   map[string]int64{},
		reloadCh: make(chan struct{}, 1),
		watchers: map[uint64]*watcher{},
		queued:   make(chan struct{}, 1),
	}
	values := make(map[string]any, len(defs))
	for _, d := range defs {
		values[d.Key] = d.Default
	}
	s.cur.Store(&state{values: values})
	return s
}

// Start subscribes to the change channel through sub, then loads the
// snapshot, and returns once the Store holds the settings in Redis. From then
// on it applies every newer change, re-reads the snapshot after each
// resubscription (Subscriber's Handler.Resubscribed) and on a version gap,
// and fires watchers, until Close. It returns ctx's error, a Redis error, or
// ErrStarted when called twice.
func (s *Store) Start(ctx context.Context, sub Subscriber) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return ErrStarted
	}
	s.started = true
	s.mu.Unlock()

	// Subscribe first: a change published after the snapshot was read is
	// then on its way to us, so nothing falls between the two.
	h := bus.HandlerFuncs{OnReceive: s.receive, OnResubscribed: s.requestReload}
	subn, err := sub.Subscribe(ctx, s.keys.changes(), h)
	if err != nil {
		return fmt.Errorf("settings: start: subscribe: %w", err)
	}
	if err := s.Reload(ctx); err != nil {
		_ = subn.Close(ctx)
		return fmt.Errorf("settings: start: %w", err)
	}
	// The background loops outlive Start's ctx: they end with Close.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.mu.Lock()
	s.sub, s.stop = subn, cancel
	s.mu.Unlock()
	s.done.Add(2)
	go s.reloadLoop(bg)
	go s.dispatchLoop(bg)
	return nil
}

// Close stops following Redis: it unsubscribes and ends the background
// loops. Reads keep answering with the last values. It returns the
// unsubscribe error, if any.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	sub, stop := s.sub, s.stop
	s.sub, s.stop = nil, nil
	s.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	s.done.Wait()
	if err := sub.Close(ctx); err != nil {
		return fmt.Errorf("settings: close: %w", err)
	}
	return nil
}

// Version returns the version of the settings this Store holds (0 before
// anything was loaded). It only grows, except when Redis itself went back
// (it lost its data): then the Store follows Redis.
func (s *Store) Version() int64 { return s.cur.Load().version }

// Values returns every setting's value, defaults filled in, with the version
// they are as of. The map is the caller's.
func (s *Store) Values() (version int64, values map[string]any) {
	st := s.cur.Load()
	values = make(map[string]any, len(st.values))
	for k, v := range st.values {
		values[k] = v
	}
	return st.version, values
}

// Int returns the value of an int setting (a number setting is truncated).
// It is lock-free. It panics for a key not in the registry.
func (s *Store) Int(key string) int {
	switch v := s.get(key).(type) {
	case int:
		return v
	case float64:
		return int(v)
	}
	return 0
}

// Float returns the value of a number or int setting. It is lock-free. It
// panics for a key not in the registry.
func (s *Store) Float(key string) float64 {
	switch v := s.get(key).(type) {
	case int:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

// String returns the value of a string setting (other types are formatted).
// It is lock-free. It panics for a key not in the registry.
func (s *Store) String(key string) string {
	switch v := s.get(key).(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return ""
}

func (s *Store) get(key string) any {
	v, ok := s.cur.Load().values[key]
	if !ok {
		def(key) // panics
	}
	return v
}

// Set validates raw for key and, if valid, stores it in Redis, bumps the
// version and publishes the change, all in one script; it returns the new
// version. The change is applied to this Store before Set returns (a read
// right after sees it); other nodes apply it when the publish reaches them.
// A refused write changes nothing and publishes nothing: the error is an
// *Error wrapping ErrUnknownSetting or ErrBadValue. Otherwise it wraps the
// Redis error.
func (s *Store) Set(ctx context.Context, key string, raw json.RawMessage) (version int64, err error) {
	v, err := Validate(key, raw)
	if err != nil {
		s.metrics.writes.WithLabelValues("refused").Inc()
		return 0, err
	}
	return s.write(ctx, opSet, key, encode(v))
}

// Reset puts key back to its default (deletes it from the hash), bumps the
// version and publishes the change; it returns the new version. The error
// is an *Error wrapping ErrUnknownSetting, or wraps the Redis error.
func (s *Store) Reset(ctx context.Context, key string) (version int64, err error) {
	if _, ok := byKey[key]; !ok {
		s.metrics.writes.WithLabelValues("refused").Inc()
		return 0, unknown(key)
	}
	return s.write(ctx, opDelete, key, nil)
}

const (
	opSet    = "set"
	opDelete = "delete"
)

func (s *Store) write(ctx context.Context, op, key string, value json.RawMessage) (int64, error) {
	args := []any{op, key}
	if op == opSet {
		args = append(args, string(value))
	}
	version, err := writeScript.Run(ctx, s.rdb,
		[]string{s.keys.values(), s.keys.version(), s.keys.changes()}, args...).Int64()
	if err != nil {
		s.metrics.writes.WithLabelValues("error").Inc()
		return 0, fmt.Errorf("settings: %s %s: %w", op, key, err)
	}
	s.metrics.writes.WithLabelValues("ok").Inc()
	s.mu.Lock()
	s.apply(key, op, value, version, "local")
	s.mu.Unlock()
	return version, nil
}

// Reload reads the snapshot (every value and the version, in one MULTI) and
// merges it: a key this Store holds at a newer version than the snapshot
// keeps its value, so a slow snapshot never rolls back a change. A snapshot
// older than what this Store already saw Redis confirm means Redis lost its
// data; the Store then takes the snapshot as it is. It returns the Redis
// error.
func (s *Store) Reload(ctx context.Context) error {
	floor := s.Version()
	snap, err := s.fetch(ctx)
	if err != nil {
		s.metrics.reloads.WithLabelValues("error").Inc()
		return fmt.Errorf("settings: reload: %w", err)
	}
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.applySnapshot(floor, snap)
	return nil
}

// snapshot is the settings as Redis held them at one version.
type snapshot struct {
	version int64
	fields  map[string]string // key -> canonical JSON
}

func (s *Store) fetch(ctx context.Context) (snapshot, error) {
	var all *redis.MapStringStringCmd
	var ver *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		all = p.HGetAll(ctx, s.keys.values())
		ver = p.Get(ctx, s.keys.version())
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return snapshot{}, err
	}
	v, err := ver.Int64()
	if errors.Is(err, redis.Nil) {
		v, err = 0, nil
	}
	if err != nil {
		return snapshot{}, fmt.Errorf("version: %w", err)
	}
	return snapshot{version: v, fields: all.Val()}, nil
}

// reloadLoop runs requested and periodic reloads until ctx ends, retrying a
// failed one with backoff.
func (s *Store) reloadLoop(ctx context.Context) {
	defer s.done.Done()
	var tick <-chan time.Time
	if s.resync > 0 {
		t := time.NewTicker(s.resync)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.reloadCh:
		case <-tick:
		}
		backoff := 50 * time.Millisecond
		for {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := s.Reload(rctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				break
			}
			s.log.Warn("settings reload failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}
}

// requestReload asks reloadLoop for a reload; it never blocks, and requests
// made while one is pending are one request.
func (s *Store) requestReload() {
	select {
	case s.reloadCh <- struct{}{}:
	default:
	}
}
