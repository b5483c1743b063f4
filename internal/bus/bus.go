// Package bus is a node's one pub/sub connection to Redis, shared by every
// package that listens: room fan-out, settings changes, long-poll wake-ups.
//
// Pattern: classic [SUBSCRIBE]/[PUBLISH] fan-out. A PUBLISH reaches every
// connection subscribed at that instant, on every master of a Redis Cluster,
// and nobody else: Redis keeps nothing for a subscriber that was away. That
// is the trap of the naive version — go-redis reconnects and resubscribes by
// itself, silently, and whatever was published in between is gone. The Bus
// therefore tells each handler when its channel was resubscribed after a
// reconnect (Handler.Resubscribed), so the handler can re-read the state it
// follows from Redis (a stream after the last id, a settings snapshot), and
// it proves liveness with a canary: it publishes to its own channel every
// CanaryEvery and is Ready only while those come back.
//
// One connection for many channels: subscribing per room or per package
// would cost a Redis connection each, and Redis Cluster pub/sub broadcasts
// every message to every node, so the count of subscriptions, not of
// connections, is what a node pays for.
//
// Sharded pub/sub (Config.Sharded, Redis Cluster only): that broadcast is the
// naive version's cost on a cluster — every PUBLISH crosses the cluster bus
// to every master, so adding masters adds no pub/sub capacity. A channel
// subscribed with SubscribeSharded is instead [SSUBSCRIBE]d on the master
// that owns its slot and published with [SPUBLISH], which that shard alone
// handles. The Bus keeps one pub/sub connection per master for these
// (sharded.go): one SSUBSCRIBE per channel, since one command may not span
// slots and go-redis's own resubscription sends them all in one. When a
// shard's connection fails (its master died: go-redis is told to re-read the
// slot map) or Redis unsubscribes a channel whose slot moved (an unasked
// "sunsubscribe"), the Bus subscribes the channels again on their new owner
// and calls Resubscribed, as after a reconnect. Node-wide channels (settings,
// notices, the canary) stay classic: Subscribe.
//
// [SUBSCRIBE]: https://redis.io/commands/subscribe/
// [PUBLISH]: https://redis.io/commands/publish/
// [SSUBSCRIBE]: https://redis.io/commands/ssubscribe/
// [SPUBLISH]: https://redis.io/commands/spublish/
package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
)

// Handler receives the messages of a channel.
type Handler interface {
	// Receive is called for each message, in arrival order for a channel,
	// never concurrently with another Receive or Resubscribed of the same
	// Bus; it must not block. payload must not be modified.
	Receive(channel string, payload []byte)
	// Resubscribed is called, like Receive, after a reconnect, a failover or
	// a slot move has subscribed the channel again: messages published while
	// it was not subscribed are lost, so re-read what you follow. It must not
	// block.
	Resubscribed()
}

// HandlerFuncs adapts two functions to a Handler; either may be nil.
type HandlerFuncs struct {
	OnReceive      func(channel string, payload []byte)
	OnResubscribed func()
}

// Receive calls OnReceive.
func (h HandlerFuncs) Receive(channel string, payload []byte) {
	if h.OnReceive != nil {
		h.OnReceive(channel, payload)
	}
}

// Resubscribed calls OnResubscribed.
func (h HandlerFuncs) Resubscribed() {
	if h.OnResubscribed != nil {
		h.OnResubscribed()
	}
}

var _ Handler = HandlerFuncs{}

// ErrClosed is returned by Subscribe and SubscribeSharded after Run has
// returned.
var ErrClosed = errors.New("bus: closed")

// Config configures a Bus.
type Config struct {
	// Node names this node's canary channel; "" = random.
	Node string
	// Prefix is the key and channel prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// CanaryEvery is how often the canary is published; 0 = 1s. The bus is
	// Ready while a canary came back within 3 × CanaryEvery.
	CanaryEvery time.Duration
	// Logger receives reconnects and errors; nil = slog.Default().
	Logger *slog.Logger
	// Registerer registers the bus metrics; nil = none.
	Registerer prometheus.Registerer
	// Sharded makes SubscribeSharded use sharded pub/sub (SSUBSCRIBE on the
	// master owning the channel's slot) when the client is a
	// *redis.ClusterClient; it is ignored for any other client. Publishers
	// of those channels must then SPUBLISH (PublishSharded does). false =
	// SubscribeSharded subscribes classically, like Subscribe.
	Sharded bool
}

// Bus multiplexes channel subscriptions over one Redis pub/sub connection.
type Bus struct {
	rdb    redis.UniversalClient
	cc     *redis.ClusterClient // rdb, when it is a cluster client
	cfg    Config
	ps     *redis.PubSub
	canary string
	log    *slog.Logger

	// dispatchMu is held while handlers run, so that no two run at once
	// although each shard has its own receiving goroutine.
	dispatchMu sync.Mutex

	// opMu orders the first SUBSCRIBE and last UNSUBSCRIBE of a channel with
	// the map change that causes them, so a quick close-then-subscribe can't
	// reach Redis as SUBSCRIBE, UNSUBSCRIBE.
	opMu     sync.Mutex
	mu       sync.Mutex // guards the fields below; held only briefly
	channels map[string]*entry
	resync   map[string]bool // channels to report Resubscribed for after a reconnect
	closed   bool
	sharded  shardedState // SubscribeSharded's channels and shards, when Config.Sharded

	lastCanary atomic.Int64 // unix nanos a canary came back
	metrics    metrics
}

type entry struct {
	subs      []*Subscription
	confirmed bool
	waiters   []chan struct{}

	// sharded channels only
	shard  *shard // the shard it is SSUBSCRIBEd on; nil = to be assigned
	resync bool   // call Resubscribed on the next confirmation
}

// Subscription is one handler's subscription to a channel.
type Subscription struct {
	b       *Bus
	channel string
	sharded bool
	h       Handler
	once    sync.Once
}

// New returns a Bus; call Run to start receiving.
func New(rdb redis.UniversalClient, cfg Config) *Bus {
	if cfg.Node == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		cfg.Node = hex.EncodeToString(b[:])
	}
	if cfg.CanaryEvery <= 0 {
		cfg.CanaryEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ks := keyspace.New(cfg.Prefix)
	b := &Bus{
		rdb:      rdb,
		cfg:      cfg,
		canary:   ks.Key("node", cfg.Node, "canary"),
		log:      cfg.Logger.With("component", "bus"),
		channels: map[string]*entry{},
		resync:   map[string]bool{},
		metrics:  newMetrics(cfg.Registerer),
	}
	b.cc, _ = rdb.(*redis.ClusterClient)
	if cfg.Sharded && b.cc != nil {
		b.sharded = newShardedState()
	}
	b.ps = rdb.Subscribe(context.Background())
	return b
}

// Run receives messages until ctx ends, then closes the connection. It
// reconnects by itself; a Subscribe waits for Run to confirm it.
func (b *Bus) Run(ctx context.Context) error {
	var shards sync.WaitGroup
	defer func() {
		b.mu.Lock()
		b.closed = true
		for _, m := range []map[string]*entry{b.channels, b.sharded.channels} {
			for _, e := range m {
				for _, w := range e.waiters {
					close(w)
				}
				e.waiters = nil
			}
		}
		b.mu.Unlock()
		_ = b.ps.Close()
		b.closeShards()
		shards.Wait()
	}()
	if b.sharded.on {
		shards.Add(1)
		go func() {
			defer shards.Done()
			b.runResharder(ctx, &shards)
		}()
	}
	// The receive loop below confirms subscriptions, so the canary's must not
	// wait for its confirmation.
	if _, _, err := b.subscribe(ctx, b.canary, HandlerFuncs{OnReceive: func(string, []byte) {
		b.lastCanary.Store(time.Now().UnixNano())
	}}); err != nil {
		return err
	}
	go b.runCanary(ctx)

	wasDown := false
	started := time.Now()
	for ctx.Err() == nil {
		msg, err := b.ps.ReceiveTimeout(ctx, b.cfg.CanaryEvery)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if isTimeout(err) {
				b.checkCanary(ctx, &started)
				continue
			}
			if !wasDown {
				b.log.Warn("pub/sub connection lost; reconnecting", "err", err)
				b.metrics.reconnects.Inc()
				b.markAllForResync()
			}
			wasDown = true
			b.reloadSlots(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if wasDown {
			b.log.Info("pub/sub connection restored")
			wasDown = false
			// The canaries missed while it was down say nothing of the new
			// connection: it gets the grace of a fresh one, or checkCanary
			// would replace it at once (and tell every handler twice).
			started = time.Now()
		}
		b.dispatch(msg)
	}
	return nil
}

// staleCanaries is how many canary periods may pass without one coming
// back on a connection that reports no error before the bus opens a new
// one (Run's checkCanary).
const staleCanaries = 5

// checkCanary replaces the pub/sub connection when it has received no
// canary for staleCanaries periods although it reports no error: it is
// alive but subscribed on a server that no longer gets the publishes — the
// old master of a Sentinel failover that came back as a standalone or a
// lagging replica. go-redis reconnects only on errors, so the bus opens a
// new connection itself (through the client, hence through Sentinel to
// the current master) with every channel, and tells their handlers to
// re-read (Resubscribed) once it confirms them. Only Run calls it.
func (b *Bus) checkCanary(ctx context.Context, since *time.Time) {
	period := b.cfg.CanaryEvery
	last := time.Unix(0, b.lastCanary.Load())
	if last.Before(*since) {
		last = *since
	}
	if time.Since(last) < staleCanaries*period {
		return
	}
	*since = time.Now() // give the new connection the same grace
	b.log.Warn("pub/sub connection receives no canary; opening a new one", "silent", time.Since(last).Round(time.Millisecond))
	b.metrics.reconnects.Inc()
	b.opMu.Lock()
	b.mu.Lock()
	chans := make([]string, 0, len(b.channels))
	for ch, e := range b.channels {
		if len(e.subs) > 0 {
			chans = append(chans, ch)
			b.resync[ch] = true
		}
	}
	b.mu.Unlock()
	old := b.ps
	b.ps = b.rdb.Subscribe(context.WithoutCancel(ctx), chans...)
	b.opMu.Unlock()
	_ = old.Close()
	b.reloadSlots(ctx)
}

// Start runs Run in a goroutine; the returned stop function ends Run and
// waits for it to return.
func (b *Bus) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Run(ctx)
	}()
	return func() { cancel(); <-done }
}

func (b *Bus) runCanary(ctx context.Context) {
	t := time.NewTicker(b.cfg.CanaryEvery)
	defer t.Stop()
	for {
		b.publishCanary(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *Bus) publishCanary(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CanaryEvery)
	defer cancel()
	if err := b.rdb.Publish(ctx, b.canary, "1").Err(); err != nil && ctx.Err() == nil {
		b.log.Debug("canary publish failed", "err", err)
		b.reloadSlots(ctx)
	}
}

// reloadSlots asks a cluster client to re-read the slot map: a failed
// connection may mean its master died and a replica took its slots, and
// go-redis re-reads the map by itself only on a MOVED reply (which a dead
// master never sends) or once a minute. go-redis coalesces the requests.
func (b *Bus) reloadSlots(ctx context.Context) {
	if b.cc != nil {
		b.cc.ReloadState(ctx)
	}
}

// Ready reports whether a canary came back recently: this node is
// subscribed and receiving.
func (b *Bus) Ready() bool {
	last := b.lastCanary.Load()
	return last != 0 && time.Since(time.Unix(0, last)) < 3*b.cfg.CanaryEvery
}

// Node returns the node id the bus was configured with.
func (b *Bus) Node() string { return b.cfg.Node }

func (b *Bus) markAllForResync() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch, e := range b.channels {
		if len(e.subs) > 0 {
			b.resync[ch] = true
		}
	}
}

func (b *Bus) dispatch(msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		b.metrics.received.Inc()
		b.mu.Lock()
		e := b.channels[m.Channel]
		var subs []*Subscription
		if e != nil {
			subs = e.subs
		}
		b.mu.Unlock()
		payload := []byte(m.Payload)
		b.dispatchMu.Lock()
		for _, s := range subs {
			s.h.Receive(m.Channel, payload)
		}
		b.dispatchMu.Unlock()
	case *redis.Subscription:
		if m.Kind != "subscribe" {
			return
		}
		b.mu.Lock()
		e := b.channels[m.Channel]
		var resub []*Subscription
		if e != nil {
			e.confirmed = true
			for _, w := range e.waiters {
				close(w)
			}
			e.waiters = nil
			if b.resync[m.Channel] {
				resub = e.subs
			}
		}
		delete(b.resync, m.Channel)
		b.mu.Unlock()
		b.dispatchMu.Lock()
		for _, s := range resub {
			s.h.Resubscribed()
		}
		b.dispatchMu.Unlock()
	}
}

// Subscribe subscribes h to channel and returns once Redis has confirmed the
// subscription, so that anything published after it returns is received.
// It returns ctx's error if ctx ends first, and ErrClosed after Run returned.
func (b *Bus) Subscribe(ctx context.Context, channel string, h Handler) (*Subscription, error) {
	s, wait, err := b.subscribe(ctx, channel, h)
	return b.await(ctx, s, wait, err)
}

// await waits for the confirmation wait of subscribe or subscribeSharded.
func (b *Bus) await(ctx context.Context, s *Subscription, wait chan struct{}, err error) (*Subscription, error) {
	if err != nil || wait == nil {
		return s, err
	}
	select {
	case <-wait:
		b.mu.Lock()
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		return s, nil
	case <-ctx.Done():
		_ = s.Close(context.WithoutCancel(ctx))
		return nil, ctx.Err()
	}
}

// subscribe adds the subscription and sends SUBSCRIBE for a new channel; it
// returns the channel closed by the confirmation, or nil when the channel was
// already confirmed.
func (b *Bus) subscribe(ctx context.Context, channel string, h Handler) (*Subscription, chan struct{}, error) {
	s := &Subscription{b: b, channel: channel, h: h}
	wait := make(chan struct{})
	b.opMu.Lock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.opMu.Unlock()
		return nil, nil, ErrClosed
	}
	e := b.channels[channel]
	first := e == nil
	if first {
		e = &entry{}
		b.channels[channel] = e
	}
	e.subs = append(e.subs, s)
	confirmed := e.confirmed
	if !confirmed {
		e.waiters = append(e.waiters, wait)
	}
	b.mu.Unlock()
	if first {
		b.metrics.channels.Inc()
		if err := b.ps.Subscribe(ctx, channel); err != nil {
			// The connection is down: go-redis subscribes it again on
			// reconnect, and the confirmation will release the waiters.
			b.log.Debug("subscribe deferred to reconnect", "channel", channel, "err", err)
		}
	}
	b.opMu.Unlock()
	if confirmed {
		return s, nil, nil
	}
	return s, wait, nil
}

// Channel returns the subscribed channel.
func (s *Subscription) Channel() string { return s.channel }

// Close removes the subscription; the Redis subscription ends with the
// channel's last one. It is safe to call more than once.
func (s *Subscription) Close(ctx context.Context) error {
	var err error
	s.once.Do(func() {
		b := s.b
		if s.sharded {
			err = b.closeSharded(ctx, s)
			return
		}
		b.opMu.Lock()
		defer b.opMu.Unlock()
		b.mu.Lock()
		e := b.channels[s.channel]
		if e == nil {
			b.mu.Unlock()
			return
		}
		for i, x := range e.subs {
			if x == s {
				e.subs = append(e.subs[:i:i], e.subs[i+1:]...)
				break
			}
		}
		last := len(e.subs) == 0
		if last {
			delete(b.channels, s.channel)
			delete(b.resync, s.channel)
		}
		closed := b.closed
		b.mu.Unlock()
		if last {
			b.metrics.channels.Dec()
			if !closed {
				err = b.ps.Unsubscribe(ctx, s.channel)
			}
		}
	})
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
