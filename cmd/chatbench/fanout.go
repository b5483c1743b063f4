package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// fanSpec is one fan-out run: clients spread round-robin over targets, all
// in one fresh lobby whose rooms hold roomSize members; the first senders
// members of each room send, either as fast as their window allows (rate 0:
// saturated) or together at rate says per second.
type fanSpec struct {
	label    string
	targets  []string
	clients  int
	roomSize int     // members per room: chatd's room.capacity (set by the caller), the hub's ?cap=
	write    string  // a bare hub's write mode (?write=: naive, coalesce, batch); "" for chatd
	senders  int     // senders per room
	rate     float64 // total says per second; 0 = saturated
	window   int     // saturated: says in flight per sender (own echo not yet seen)
	dur      time.Duration
	sample   int    // fixed rate: one latency sample per sample deliveries per member (default 16)
	pids     []int  // server processes whose CPU the run reports (unknown: none)
	redisPid int    // the Redis process, 0 if unknown
	redis    string // fixed rate: Redis address to PING during the run ("" for none)
	ingress  string // a bare hub's ingress (?ingress=: sync, pipe); "" for chatd
	// fixed rate: latency from the say's scheduled send time instead of
	// the moment it was written (a late generator then shows as latency,
	// not as a missing sample: no coordinated omission), and each send's
	// lag behind its schedule recorded
	fromSchedule bool
	// rinfo, when set, reads Redis's INFO cpu and commandstats at the
	// start and end of the measured span (RedisInfoCPUUs, RedisCalls)
	rinfo func(context.Context) (redisUsage, error)
}

// fanResult is what one run measured.
type fanResult struct {
	DeliveredPerSec float64 `json:"delivered_per_s"`
	SentPerSec      float64 `json:"sent_per_s"`
	Sent            int64   `json:"sent"`
	Acked           int64   `json:"acked"`
	Refused         int64   `json:"refused"`
	Skipped         int64   `json:"skipped"`
	Expected        int64   `json:"expected"`
	Delivered       int64   `json:"delivered"`
	Duplicates      int64   `json:"duplicates"`
	OutOfOrder      int64   `json:"out_of_order"`
	Dropped         int64   `json:"dropped"`
	Rooms           int     `json:"rooms"`
	MaxMembers      int     `json:"max_members"`
	Senders         int     `json:"senders"`
	Lat             Summary `json:"latency"`
	SendLag         Summary `json:"send_lag"` // fixed rate, fromSchedule: send time − scheduled time
	AckLat          Summary `json:"ack_latency"`
	PingLat         Summary `json:"redis_ping_latency"`
	// CPU during the measured span, in cores (1 = one core all the time;
	// -1 unknown): chatbench itself, the server processes, Redis.
	GenCPU    float64 `json:"generator_cpu_cores"`
	ServerCPU float64 `json:"server_cpu_cores"`
	RedisCPU  float64 `json:"redis_cpu_cores"`
	// INFO over the measured span (with rinfo; -1 unknown): Redis's own
	// used_cpu_user+used_cpu_sys in µs, and commandstats calls (commands
	// inside scripts counted too), the INFO readings left out
	RedisInfoCPUUs float64          `json:"redis_info_cpu_us"`
	RedisCalls     float64          `json:"redis_calls"`
	RedisByCmd     map[string]int64 `json:"redis_calls_by_command,omitempty"`
	// The Redis process's system calls and event-loop wakeups over the
	// measured span (sysCounts; -1 unknown).
	RedisReads   float64 `json:"redis_read_syscalls"`
	RedisWrites  float64 `json:"redis_write_syscalls"`
	RedisWakeups float64 `json:"redis_wakeups"`
	Elapsed      float64 `json:"elapsed_s"`
	FirstError   string  `json:"first_error,omitempty"`
}

// Lossless reports delivered = acked × members, every say acked, no client
// dropped, nothing delivered twice or out of order.
func (r fanResult) Lossless() bool {
	return r.Delivered == r.Expected && r.Acked == r.Sent && r.Dropped == 0 && r.Refused == 0 &&
		r.Duplicates == 0 && r.OutOfOrder == 0
}

// fanClient is one member. Its reader goroutine owns the counters it adds
// to (atomics only because the run polls them) and the latency slices; the
// sender goroutine owns sbuf.
type fanClient struct {
	i      int
	ws     *WS
	room   string
	rm     *fanRoom
	sender bool
	phase  *atomic.Int32
	sample int
	recLat bool

	sent, acked, refused, skipped, own atomic.Int64
	delivered                          [2]atomic.Int64
	dups, disorder                     atomic.Int64
	win                                chan struct{}
	n                                  int     // reader: phase-1 deliveries, for sampling
	lat, ackLat                        []int64 // reader only
	last                               []seqAt // reader only: last seq seen per sender
	sbuf                               []byte  // sender only
	lag                                []int64 // sender only: send lag behind the schedule, ns
	dropped                            atomic.Bool
	started                            bool
	done                               chan struct{}
	errMu                              sync.Mutex
	err                                string
}

// maxLag bounds, in a saturated run, how many messages the slowest member
// of a room may be behind the room's senders: a sender waits while it is
// reached. Both servers drop a member with 256 frames queued; without the
// bound, senders that only wait for their own echo outrun a member the
// scheduler starves, and the run measures slow-consumer drops instead of
// delivery.
const maxLag = 192

// fanRoom is one room's members and senders.
type fanRoom struct {
	members, senders []*fanClient
}

// lagging reports whether the slowest member is maxLag or more messages
// behind what the room's senders sent.
func (r *fanRoom) lagging() bool {
	var sent int64
	for _, c := range r.senders {
		sent += c.sent.Load()
	}
	low := sent
	for _, c := range r.members {
		low = min(low, c.delivered[1].Load())
	}
	return sent-low >= maxLag
}

// seqAt is the last sequence number a member saw from one sender.
type seqAt struct{ sender, seq int }

func (c *fanClient) fail(s string) {
	c.errMu.Lock()
	if c.err == "" {
		c.err = s
	}
	c.errMu.Unlock()
}

// read is the member's reader: one event at a time (several may share a
// frame), found by byte scanning; it counts deliveries by phase, checks
// each sender's sequence (no duplicate, no reordering), samples latency
// from the send time in the text, and returns a window slot when it sees
// its own message. It reads the clock only for a sample.
func (c *fanClient) read() {
	defer close(c.done)
	for {
		ev, err := c.ws.NextEvent()
		if err != nil {
			if c.phase.Load() < 3 {
				c.dropped.Store(true)
				c.fail(err.Error())
			}
			return
		}
		switch string(eventType(ev)) {
		case "message":
			m, ok := parseFanText(ev)
			if !ok || m.phase > 1 {
				continue
			}
			c.delivered[m.phase].Add(1)
			if m.phase == 1 {
				c.order(m.sender, m.seq)
				c.n++
				if c.recLat && c.n%c.sample == 0 {
					c.lat = append(c.lat, time.Now().UnixNano()-m.ns)
				}
			}
			if m.sender == c.i {
				c.own.Add(1)
				select {
				case c.win <- struct{}{}:
				default:
				}
			}
		case "ack":
			if ph, _, ns, ok := parseRef(ev); ok && ph == 1 {
				c.acked.Add(1)
				if c.recLat {
					c.ackLat = append(c.ackLat, time.Now().UnixNano()-ns)
				}
			}
		case "error":
			var f Frame
			if err := decodeFrame(ev, &f); err != nil {
				c.fail(err.Error())
				continue
			}
			if ph, _, _, ok := parseRef(ev); ok && ph == 1 {
				c.refused.Add(1)
			}
			c.fail(f.Code + ": " + f.ErrText)
		}
	}
}

// order checks that sender's says arrive once each and in the order sent
// (their seq strictly rises; gaps are skipped sends).
func (c *fanClient) order(sender, seq int) {
	for i := range c.last {
		if c.last[i].sender == sender {
			switch last := c.last[i].seq; {
			case seq == last:
				c.dups.Add(1)
			case seq < last:
				c.disorder.Add(1)
			default:
				c.last[i].seq = seq
			}
			return
		}
	}
	c.last = append(c.last, seqAt{sender, seq})
}

// sayPad is the padding that makes a fan-out say's text 100 bytes.
var sayPad = func() []byte {
	b := make([]byte, 100)
	for i := range b {
		b[i] = 'x'
	}
	return b
}()

// say sends say number k of phase: its text carries the sender, k and the
// send time (padded to 100 bytes), its ref the phase, k and the send time.
// Built by hand in the sender's buffer: no map, no json.Marshal. at is the
// send time written (unix ns): the scheduled one of an open-loop sender,
// or 0 for now.
func (c *fanClient) say(phase, k int, at int64) error {
	now := at
	if now == 0 {
		now = time.Now().UnixNano()
	}
	b := append(c.sbuf[:0], `{"type":"say","room":"`...)
	b = append(b, c.room...)
	b = append(b, `","text":"fb `...)
	t0 := len(b) - 3
	b = strconv.AppendInt(b, int64(phase), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(c.i), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, now, 10)
	b = append(b, ' ')
	if n := 100 - (len(b) - t0); n > 0 {
		b = append(b, sayPad[:n]...)
	}
	b = append(b, `","ref":"p`...)
	b = strconv.AppendInt(b, int64(phase), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, now, 10)
	b = append(b, `"}`...)
	c.sbuf = b
	err := c.ws.SendText(b)
	if err == nil && phase == 1 {
		c.sent.Add(1)
	}
	return err
}

// fanout runs one fan-out measurement.
func (b *Bench) fanout(ctx context.Context, s fanSpec) (fanResult, error) {
	var res fanResult
	if s.roomSize <= 0 {
		s.roomSize = 50
	}
	if s.senders <= 0 {
		s.senders = 4
	}
	if s.window <= 0 {
		s.window = 1
	}
	if s.sample <= 0 {
		s.sample = 16
	}
	tag := b.tag("f")
	lobby := "fo-" + tag
	var phase atomic.Int32
	cs := make([]*fanClient, s.clients)
	defer func() {
		phase.Store(3)
		for _, c := range cs {
			if c != nil && c.ws != nil {
				c.ws.Close()
				if c.started {
					<-c.done
				}
			}
		}
	}()
	b.prog.Say("%s: connecting %d clients", s.label, s.clients)
	err := parallel(ctx, s.clients, 32, func(i int) error {
		base := s.targets[i%len(s.targets)]
		tok, err := b.api.Session(ctx, base, fmt.Sprintf("%sx%d", tag, i))
		if err != nil {
			return err
		}
		q := url.Values{"cap": {strconv.Itoa(s.roomSize)}}
		if s.write != "" {
			q.Set("write", s.write)
		}
		if s.ingress != "" {
			q.Set("ingress", s.ingress)
		}
		ws, _, err := dialWS(ctx, base, tok, q)
		if err != nil {
			return err
		}
		c := &fanClient{i: i, ws: ws, phase: &phase, sample: s.sample, recLat: s.rate > 0,
			win: make(chan struct{}, s.window), done: make(chan struct{})}
		cs[i] = c
		room, err := ws.Join(lobby)
		if err != nil {
			return err
		}
		c.room = room.ID
		c.started = true
		go c.read()
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("%s: set up: %w", s.label, err)
	}
	members := map[string]int{}
	rooms := map[string]*fanRoom{}
	var senders []*fanClient
	for _, c := range cs {
		members[c.room]++
		if rooms[c.room] == nil {
			rooms[c.room] = &fanRoom{}
		}
		c.rm = rooms[c.room]
		c.rm.members = append(c.rm.members, c)
		if members[c.room] <= s.senders {
			c.sender = true
			senders = append(senders, c)
			c.rm.senders = append(c.rm.senders, c)
			for range s.window {
				c.win <- struct{}{}
			}
		}
	}
	res.Rooms, res.Senders = len(members), len(senders)
	for _, n := range members {
		res.MaxMembers = max(res.MaxMembers, n)
	}
	// warm up: one say per room, wait until every member has it, so every
	// subscription is live before the clock starts
	var warmWant int64
	warmed := map[string]bool{}
	for _, c := range senders {
		if warmed[c.room] {
			continue
		}
		warmed[c.room] = true
		warmWant += int64(members[c.room])
		if err := c.say(0, 0, 0); err != nil {
			return res, fmt.Errorf("%s: warm-up say: %w", s.label, err)
		}
	}
	if !waitFor(ctx, 15*time.Second, func() bool { return sum(cs, func(c *fanClient) int64 { return c.delivered[0].Load() }) >= warmWant }) {
		return res, fmt.Errorf("%s: warm-up: %d of %d deliveries in 15s", s.label,
			sum(cs, func(c *fanClient) int64 { return c.delivered[0].Load() }), warmWant)
	}

	b.prog.Say("%s: %d clients in %d rooms, %d senders, %s for %s", s.label, s.clients, res.Rooms, len(senders), rateName(s.rate), s.dur)
	phase.Store(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pings Lat
	if s.redis != "" && s.rate > 0 {
		rc := redis.NewClient(&redis.Options{Addr: s.redis, PoolSize: 1})
		defer rc.Close()
		_ = rc.Ping(ctx).Err() // connect before the clock starts
		wg.Go(func() { pingLoop(ctx, rc, stop, &pings) })
	}
	var u0 redisUsage
	var infoErr error
	if s.rinfo != nil {
		u0, infoErr = s.rinfo(ctx)
	}
	cpu := startCPU(append([]int{0, s.redisPid}, s.pids...)...)
	var sys0 sysCounts
	sysKnown := false
	if s.redisPid != 0 {
		c, err := readSysCounts(s.redisPid)
		sys0, sysKnown = c, err == nil
	}
	t0 := time.Now()
	end := t0.Add(s.dur)
	for _, c := range senders {
		wg.Go(func() {
			if s.rate <= 0 {
				for k := 0; ; k++ {
					select {
					case <-c.win:
					case <-stop:
						return
					}
					for c.rm.lagging() {
						select {
						case <-stop:
							return
						default:
							time.Sleep(200 * time.Microsecond)
						}
					}
					if err := c.say(1, k, 0); err != nil {
						c.fail(err.Error())
						return
					}
				}
			}
			iv := time.Duration(float64(time.Second) * float64(len(senders)) / s.rate)
			off := time.Duration(rand.Int64N(int64(iv)))
			t := time.NewTimer(time.Hour)
			defer t.Stop()
			for k := 0; ; k++ {
				at := t0.Add(off + time.Duration(k)*iv)
				if !at.Before(end) {
					return
				}
				t.Reset(time.Until(at))
				select {
				case <-t.C:
				case <-stop:
					return
				}
				if c.sent.Load()-c.own.Load() >= 100 {
					c.skipped.Add(1) // open loop, but bounded
					continue
				}
				var stamp int64
				if s.fromSchedule {
					stamp = at.UnixNano()
					c.lag = append(c.lag, time.Now().UnixNano()-stamp)
				}
				if err := c.say(1, k, stamp); err != nil {
					c.fail(err.Error())
					return
				}
			}
		})
	}
	select {
	case <-time.After(s.dur):
	case <-ctx.Done():
	}
	res.Delivered = sum(cs, func(c *fanClient) int64 { return c.delivered[1].Load() })
	elapsed := time.Since(t0)
	close(stop)
	cores := cpu.cores()
	res.RedisReads, res.RedisWrites, res.RedisWakeups = -1, -1, -1
	if sysKnown {
		if sys1, err := readSysCounts(s.redisPid); err == nil {
			res.RedisReads = float64(sys1.reads - sys0.reads)
			res.RedisWrites = float64(sys1.writes - sys0.writes)
			res.RedisWakeups = float64(sys1.wakeups - sys0.wakeups)
		}
	}
	res.RedisInfoCPUUs, res.RedisCalls, res.Elapsed = -1, -1, elapsed.Seconds()
	if s.rinfo != nil && infoErr == nil {
		if u1, err := s.rinfo(ctx); err == nil {
			d := u0.delta(u1, costRate{})
			res.RedisInfoCPUUs, res.RedisCalls, res.RedisByCmd = d.cpuUs, d.calls, d.byCmd
		}
	}
	res.GenCPU, res.RedisCPU, res.ServerCPU = cores[0], cores[1], -1
	if s.redisPid == 0 {
		res.RedisCPU = -1
	}
	if len(s.pids) > 0 {
		res.ServerCPU = 0
		for _, v := range cores[2:] {
			if v < 0 {
				res.ServerCPU = -1
				break
			}
			res.ServerCPU += v
		}
	}
	res.DeliveredPerSec = float64(res.Delivered) / elapsed.Seconds()
	b.prog.Say("%s: stopping senders after %s", s.label, elapsed.Truncate(time.Millisecond))
	wg.Wait()
	res.Sent = sum(cs, func(c *fanClient) int64 { return c.sent.Load() })
	res.SentPerSec = float64(res.Sent) / elapsed.Seconds()

	// drain: until every acked say reached every member, or 5 s without
	// progress
	phase.Store(2)
	b.prog.Say("%s: draining", s.label)
	expected := func() int64 {
		var e int64
		for _, c := range senders {
			e += c.acked.Load() * int64(members[c.room])
		}
		return e
	}
	last, lastAt := int64(-1), time.Now()
	for ctx.Err() == nil {
		d := sum(cs, func(c *fanClient) int64 { return c.delivered[1].Load() })
		a := sum(senders, func(c *fanClient) int64 { return c.acked.Load() + c.refused.Load() })
		if d >= expected() && a >= res.Sent {
			break
		}
		if d != last {
			last, lastAt = d, time.Now()
		} else if time.Since(lastAt) > 5*time.Second {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// a moment more: a duplicate would arrive after the count is reached
	time.Sleep(50 * time.Millisecond)
	res.Expected = expected()
	res.Delivered = sum(cs, func(c *fanClient) int64 { return c.delivered[1].Load() })
	res.Acked = sum(cs, func(c *fanClient) int64 { return c.acked.Load() })
	res.Refused = sum(cs, func(c *fanClient) int64 { return c.refused.Load() })
	res.Skipped = sum(cs, func(c *fanClient) int64 { return c.skipped.Load() })
	for _, c := range cs {
		if c.dropped.Load() {
			res.Dropped++
		}
		c.errMu.Lock()
		if c.err != "" && res.FirstError == "" {
			res.FirstError = c.err
		}
		c.errMu.Unlock()
	}
	phase.Store(3)
	b.prog.Say("%s: closing", s.label)
	for _, c := range cs {
		c.ws.Close()
		<-c.done
	}
	res.Duplicates = sum(cs, func(c *fanClient) int64 { return c.dups.Load() })
	res.OutOfOrder = sum(cs, func(c *fanClient) int64 { return c.disorder.Load() })
	b.prog.Say("%s: closed", s.label)
	if s.rate > 0 {
		var lat, ack, lag Lat
		for _, c := range cs {
			lat.AddAll(c.lat)
			ack.AddAll(c.ackLat)
			lag.AddAll(c.lag)
		}
		res.Lat, res.AckLat, res.PingLat, res.SendLag = lat.Summary(), ack.Summary(), pings.Summary(), lag.Summary()
	}
	return res, nil
}

// pingLoop sends one PING every 5 ms on rc's single connection until stop,
// recording each round trip: what one Redis round trip costs under the
// run's load.
func pingLoop(ctx context.Context, rc *redis.Client, stop <-chan struct{}, into *Lat) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		case <-ctx.Done():
			return
		}
		t0 := time.Now()
		if rc.Ping(ctx).Err() == nil {
			into.Add(time.Since(t0))
		}
	}
}

func rateName(rate float64) string {
	if rate <= 0 {
		return "saturated"
	}
	return fmt.Sprintf("%.0f says/s", rate)
}

func sum[T any](xs []T, f func(T) int64) int64 {
	var n int64
	for _, x := range xs {
		n += f(x)
	}
	return n
}

// waitFor polls cond every 10 ms until it holds (true) or limit passes.
func waitFor(ctx context.Context, limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// roomsFor is how many 50-seat rooms n clients fill.
func roomsFor(n, capacity int) int { return int(math.Ceil(float64(n) / float64(capacity))) }
