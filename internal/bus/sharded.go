package bus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// shardedState holds the channels of SubscribeSharded and the shards they
// are subscribed on; guarded by Bus.mu except where noted.
type shardedState struct {
	on       bool
	channels map[string]*entry
	shards   map[string]*shard // by master address
	kick     chan struct{}     // wakes the resharder; buffered, never closed
}

func newShardedState() shardedState {
	return shardedState{
		on:       true,
		channels: map[string]*entry{},
		shards:   map[string]*shard{},
		kick:     make(chan struct{}, 1),
	}
}

// shard is one pub/sub connection to one master, carrying the channels of
// the slots it owns. A failed shard is closed and never reused: its channels
// are assigned again, to a new shard.
type shard struct {
	addr string
	ps   *redis.PubSub
	// unsub counts SUNSUBSCRIBEs sent and not yet answered, by channel, to
	// tell their answers from Redis's own (a slot moved). Guarded by Bus.mu.
	unsub map[string]int
	dead  bool // guarded by Bus.mu
	live  bool // a subscription was confirmed on it; guarded by Bus.mu
}

// reshardEvery is how often unassigned channels are tried again while some
// remain (a master is down and not yet replaced).
const reshardEvery = 250 * time.Millisecond

// minShardSilence is the least time a shard's master may leave a PING
// unanswered before the bus gives up on it (3 × CanaryEvery when that is
// longer: 3 s by default). A live master on a loaded machine, or one busy
// with a failover elsewhere in the cluster, may take a few hundred ms to
// answer; giving up on it then drops and resubscribes channels that never
// moved. A hung master still fails its shard within 2 s, as long as
// chatd's Redis read timeout.
const minShardSilence = 2 * time.Second

// Sharded reports whether SubscribeSharded uses sharded pub/sub: Config.Sharded
// was set and the client is a cluster client. Publishers of those channels
// must SPUBLISH exactly when it is true.
func (b *Bus) Sharded() bool { return b.sharded.on }

// SubscribeSharded subscribes h to a per-key channel (a room's events) and
// returns once Redis has confirmed the subscription. With Sharded, the
// channel is SSUBSCRIBEd on the master owning its slot, followed across
// failovers and slot moves; otherwise it is Subscribe. It returns ctx's error
// if ctx ends first (a shard's master may be down until its replica is
// promoted), and ErrClosed after Run returned.
func (b *Bus) SubscribeSharded(ctx context.Context, channel string, h Handler) (*Subscription, error) {
	if !b.sharded.on {
		return b.Subscribe(ctx, channel, h)
	}
	s := &Subscription{b: b, channel: channel, sharded: true, h: h}
	wait := make(chan struct{})
	b.opMu.Lock()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.opMu.Unlock()
		return nil, ErrClosed
	}
	e := b.sharded.channels[channel]
	if e == nil {
		e = &entry{}
		b.sharded.channels[channel] = e
		b.metrics.channels.Inc()
	}
	e.subs = append(e.subs, s)
	if e.confirmed {
		wait = nil
	} else {
		e.waiters = append(e.waiters, wait)
	}
	b.mu.Unlock()
	b.opMu.Unlock()
	b.kickResharder()
	return b.await(ctx, s, wait, nil)
}

// PublishSharded publishes payload to a channel subscribed with
// SubscribeSharded: SPUBLISH when Sharded, PUBLISH otherwise. It returns
// the error of the command.
func (b *Bus) PublishSharded(ctx context.Context, channel string, payload any) error {
	if b.sharded.on {
		return b.cc.SPublish(ctx, channel, payload).Err()
	}
	return b.rdb.Publish(ctx, channel, payload).Err()
}

func (b *Bus) kickResharder() {
	select {
	case b.sharded.kick <- struct{}{}:
	default:
	}
}

// runResharder subscribes every unassigned sharded channel on the master
// that owns it now, whenever kicked and every reshardEvery while some remain.
// Shard readers it starts are counted in wg.
func (b *Bus) runResharder(ctx context.Context, wg *sync.WaitGroup) {
	t := time.NewTicker(reshardEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.sharded.kick:
		case <-t.C:
		}
		b.assignPending(ctx, wg)
	}
}

// assignPending SSUBSCRIBEs each unassigned channel on its slot's master,
// one command per channel: one SSUBSCRIBE may not name channels of two
// slots (CROSSSLOT).
func (b *Bus) assignPending(ctx context.Context, wg *sync.WaitGroup) {
	b.opMu.Lock()
	defer b.opMu.Unlock()
	b.mu.Lock()
	var pending []string
	for ch, e := range b.sharded.channels {
		if e.shard == nil {
			pending = append(pending, ch)
		}
	}
	b.mu.Unlock()
	for _, ch := range pending {
		if ctx.Err() != nil {
			return
		}
		node, err := b.cc.MasterForKey(ctx, ch)
		if err != nil {
			b.log.Debug("no master for sharded channel yet", "channel", ch, "err", err)
			b.reloadSlots(ctx)
			return
		}
		addr := node.Options().Addr
		b.mu.Lock()
		e := b.sharded.channels[ch]
		if e == nil || e.shard != nil || b.closed {
			b.mu.Unlock()
			continue
		}
		sh := b.sharded.shards[addr]
		if sh == nil {
			sh = &shard{addr: addr, ps: node.SSubscribe(ctx), unsub: map[string]int{}}
			b.sharded.shards[addr] = sh
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.readShard(ctx, sh)
			}()
		}
		e.shard = sh
		b.mu.Unlock()
		if err := sh.ps.SSubscribe(ctx, ch); err != nil {
			b.shardFailed(ctx, sh, err)
		}
	}
}

// readShard receives a shard's messages until ctx ends or the shard fails.
func (b *Bus) readShard(ctx context.Context, sh *shard) {
	lastSeen := time.Now()
	for ctx.Err() == nil {
		msg, err := sh.ps.ReceiveTimeout(ctx, b.cfg.CanaryEvery)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if isTimeout(err) {
				// A hung master answers nothing: PING it, and give up
				// on it when three rounds brought nothing back.
				if time.Since(lastSeen) > max(3*b.cfg.CanaryEvery, minShardSilence) {
					b.shardFailed(ctx, sh, errors.New("no answer to PING"))
					return
				}
				_ = sh.ps.Ping(ctx)
				continue
			}
			b.shardFailed(ctx, sh, err)
			return
		}
		lastSeen = time.Now()
		b.dispatchShard(ctx, sh, msg)
	}
}

// shardFailed closes sh and leaves its channels to be assigned again, with
// Resubscribed called when they are confirmed on their new shard.
func (b *Bus) shardFailed(ctx context.Context, sh *shard, err error) {
	b.mu.Lock()
	if sh.dead {
		b.mu.Unlock()
		return
	}
	sh.dead = true
	if b.sharded.shards[sh.addr] == sh {
		delete(b.sharded.shards, sh.addr)
	}
	n := 0
	for _, e := range b.sharded.channels {
		if e.shard == sh {
			e.shard = nil
			e.resync = e.resync || e.confirmed
			n++
		}
	}
	closed, live := b.closed, sh.live
	b.mu.Unlock()
	_ = sh.ps.Close()
	if closed || ctx.Err() != nil {
		return
	}
	b.reloadSlots(ctx)
	if !live {
		// a master that is down until its replica is promoted: the
		// resharder tries again every reshardEvery
		b.log.Debug("sharded pub/sub connection failed", "master", sh.addr, "err", err)
		return
	}
	b.log.Warn("sharded pub/sub connection lost; subscribing its channels again", "master", sh.addr, "channels", n, "err", err)
	b.metrics.reconnects.Inc()
	b.kickResharder()
}

func (b *Bus) dispatchShard(ctx context.Context, sh *shard, msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		b.metrics.received.Inc()
		b.mu.Lock()
		var subs []*Subscription
		if e := b.sharded.channels[m.Channel]; e != nil && e.shard == sh {
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
		switch m.Kind {
		case "ssubscribe":
			b.confirmSharded(sh, m.Channel)
		case "sunsubscribe":
			b.mu.Lock()
			if sh.unsub[m.Channel] > 0 {
				// the answer to our own SUNSUBSCRIBE
				if sh.unsub[m.Channel]--; sh.unsub[m.Channel] == 0 {
					delete(sh.unsub, m.Channel)
				}
				b.mu.Unlock()
				return
			}
			// Redis dropped the channel: its slot moved to another master.
			e := b.sharded.channels[m.Channel]
			moved := e != nil && e.shard == sh
			if moved {
				e.shard = nil
				e.resync = e.resync || e.confirmed
			}
			sh.unsub[m.Channel]++ // answered by the SUNSUBSCRIBE below
			b.mu.Unlock()
			// go-redis still lists the channel on this connection and would
			// subscribe it here again on a reconnect: take it off.
			if err := sh.ps.SUnsubscribe(ctx, m.Channel); err != nil {
				b.shardFailed(ctx, sh, err)
			}
			if moved {
				b.log.Info("sharded channel moved; subscribing it on its new master", "channel", m.Channel, "from", sh.addr)
				b.reloadSlots(ctx)
				b.kickResharder()
			}
		}
	}
}

func (b *Bus) confirmSharded(sh *shard, channel string) {
	b.mu.Lock()
	e := b.sharded.channels[channel]
	if e == nil || e.shard != sh {
		b.mu.Unlock()
		return
	}
	e.confirmed = true
	sh.live = true
	for _, w := range e.waiters {
		close(w)
	}
	e.waiters = nil
	var resub []*Subscription
	if e.resync {
		e.resync = false
		resub = e.subs
	}
	b.mu.Unlock()
	b.dispatchMu.Lock()
	for _, s := range resub {
		s.h.Resubscribed()
	}
	b.dispatchMu.Unlock()
}

// closeSharded removes s; the channel's last subscription SUNSUBSCRIBEs it.
func (b *Bus) closeSharded(ctx context.Context, s *Subscription) error {
	b.opMu.Lock()
	defer b.opMu.Unlock()
	b.mu.Lock()
	e := b.sharded.channels[s.channel]
	if e == nil {
		b.mu.Unlock()
		return nil
	}
	for i, x := range e.subs {
		if x == s {
			e.subs = append(e.subs[:i:i], e.subs[i+1:]...)
			break
		}
	}
	if len(e.subs) > 0 {
		b.mu.Unlock()
		return nil
	}
	delete(b.sharded.channels, s.channel)
	b.metrics.channels.Dec()
	sh := e.shard
	if sh == nil || sh.dead || b.closed {
		b.mu.Unlock()
		return nil
	}
	sh.unsub[s.channel]++
	b.mu.Unlock()
	if err := sh.ps.SUnsubscribe(ctx, s.channel); err != nil {
		b.shardFailed(ctx, sh, err)
		return err
	}
	return nil
}

// closeShards closes every shard's connection; Run calls it on its way out.
func (b *Bus) closeShards() {
	b.mu.Lock()
	var all []*shard
	for _, sh := range b.sharded.shards {
		sh.dead = true
		all = append(all, sh)
	}
	b.sharded.shards = map[string]*shard{}
	b.mu.Unlock()
	for _, sh := range all {
		_ = sh.ps.Close()
	}
}
