package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fanSpec is one fan-out run: clients spread round-robin over targets, all
// in one fresh lobby (rooms of 50), each sending either as fast as its
// window allows (rate 0: saturated) or at rate/clients says per second.
type fanSpec struct {
	label   string
	targets []string
	clients int
	rate    float64 // total says per second; 0 = saturated
	window  int     // saturated: says in flight per client (own echo not yet seen)
	dur     time.Duration
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
	Dropped         int64   `json:"dropped"`
	Rooms           int     `json:"rooms"`
	MaxMembers      int     `json:"max_members"`
	Lat             Summary `json:"latency"`
	FirstError      string  `json:"first_error,omitempty"`
}

// Lossless reports delivered = acked × members, every say acked, no client
// dropped.
func (r fanResult) Lossless() bool {
	return r.Delivered == r.Expected && r.Acked == r.Sent && r.Dropped == 0 && r.Refused == 0
}

type fanClient struct {
	i     int
	ws    *WS
	room  string
	phase *atomic.Int32

	sent, acked, refused, skipped, own atomic.Int64
	delivered                          [2]atomic.Int64
	win                                chan struct{}
	lat                                []int64 // reader goroutine only
	dropped                            atomic.Bool
	started                            bool
	done                               chan struct{}
	errMu                              sync.Mutex
	err                                string
}

func (c *fanClient) fail(s string) {
	c.errMu.Lock()
	if c.err == "" {
		c.err = s
	}
	c.errMu.Unlock()
}

// read is the client's reader: it decodes every frame, counts messages by
// phase, records latency from the send time in the text, and returns a
// window slot when it sees its own message.
func (c *fanClient) read(recordLat bool) {
	defer close(c.done)
	var f Frame
	for {
		if err := c.ws.Read(&f); err != nil {
			if c.phase.Load() < 3 {
				c.dropped.Store(true)
				c.fail(err.Error())
			}
			return
		}
		now := time.Now().UnixNano()
		switch f.Type {
		case "message":
			// text: "fb <phase> <sender> <unix ns>"
			fs := strings.Fields(f.Msg.Text)
			if len(fs) != 4 || fs[0] != "fb" {
				continue
			}
			ph, _ := strconv.Atoi(fs[1])
			if ph < 0 || ph > 1 {
				continue
			}
			c.delivered[ph].Add(1)
			sender, _ := strconv.Atoi(fs[2])
			if ph == 1 && recordLat {
				if ts, err := strconv.ParseInt(fs[3], 10, 64); err == nil {
					c.lat = append(c.lat, now-ts)
				}
			}
			if sender == c.i {
				c.own.Add(1)
				select {
				case c.win <- struct{}{}:
				default:
				}
			}
		case "ack":
			if strings.HasPrefix(f.Ref, "p1-") {
				c.acked.Add(1)
			}
		case "error":
			if strings.HasPrefix(f.Ref, "p1-") {
				c.refused.Add(1)
			}
			c.fail(f.Code + ": " + f.ErrText)
		}
	}
}

func (c *fanClient) say(phase, k int) error {
	text := "fb " + strconv.Itoa(phase) + " " + strconv.Itoa(c.i) + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
	err := c.ws.Send(map[string]string{"type": "say", "room": c.room, "text": text, "ref": "p" + strconv.Itoa(phase) + "-" + strconv.Itoa(k)})
	if err == nil && phase == 1 {
		c.sent.Add(1)
	}
	return err
}

// fanout runs one fan-out measurement.
func (b *Bench) fanout(ctx context.Context, s fanSpec) (fanResult, error) {
	var res fanResult
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
		ws, _, err := dialWS(ctx, base, tok)
		if err != nil {
			return err
		}
		c := &fanClient{i: i, ws: ws, phase: &phase, win: make(chan struct{}, max(1, s.window)), done: make(chan struct{})}
		cs[i] = c
		room, err := ws.Join(lobby)
		if err != nil {
			return err
		}
		c.room = room.ID
		c.started = true
		go c.read(s.rate > 0)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("%s: set up: %w", s.label, err)
	}
	members := map[string]int{}
	first := map[string]*fanClient{}
	for _, c := range cs {
		members[c.room]++
		if first[c.room] == nil {
			first[c.room] = c
		}
		for range s.window {
			c.win <- struct{}{}
		}
	}
	res.Rooms = len(members)
	for _, n := range members {
		res.MaxMembers = max(res.MaxMembers, n)
	}
	// warm up: one say per room, wait until every member has it, so every
	// subscription is live before the clock starts
	var warmWant int64
	for r, c := range first {
		warmWant += int64(members[r])
		if err := c.say(0, 0); err != nil {
			return res, fmt.Errorf("%s: warm-up say: %w", s.label, err)
		}
	}
	if !waitFor(ctx, 15*time.Second, func() bool { return sum(cs, func(c *fanClient) int64 { return c.delivered[0].Load() }) >= warmWant }) {
		return res, fmt.Errorf("%s: warm-up: %d of %d deliveries in 15s", s.label,
			sum(cs, func(c *fanClient) int64 { return c.delivered[0].Load() }), warmWant)
	}

	b.prog.Say("%s: %d clients in %d rooms, %s for %s", s.label, s.clients, res.Rooms, rateName(s.rate), s.dur)
	phase.Store(1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	t0 := time.Now()
	end := t0.Add(s.dur)
	for _, c := range cs {
		wg.Go(func() {
			if s.rate <= 0 {
				for k := 0; ; k++ {
					select {
					case <-c.win:
					case <-stop:
						return
					}
					if err := c.say(1, k); err != nil {
						c.fail(err.Error())
						return
					}
				}
			}
			iv := time.Duration(float64(time.Second) * float64(s.clients) / s.rate)
			off := time.Duration(rand.Int64N(int64(iv)))
			for k := 0; ; k++ {
				at := t0.Add(off + time.Duration(k)*iv)
				if !at.Before(end) {
					return
				}
				select {
				case <-time.After(time.Until(at)):
				case <-stop:
					return
				}
				if c.sent.Load()-c.own.Load() >= 100 {
					c.skipped.Add(1) // open loop, but bounded
					continue
				}
				if err := c.say(1, k); err != nil {
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
	close(stop)
	elapsed := time.Since(t0)
	res.Delivered = sum(cs, func(c *fanClient) int64 { return c.delivered[1].Load() })
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
		for _, c := range cs {
			e += c.acked.Load() * int64(members[c.room])
		}
		return e
	}
	last, lastAt := int64(-1), time.Now()
	for ctx.Err() == nil {
		d := sum(cs, func(c *fanClient) int64 { return c.delivered[1].Load() })
		a := sum(cs, func(c *fanClient) int64 { return c.acked.Load() + c.refused.Load() })
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
	b.prog.Say("%s: closed", s.label)
	if s.rate > 0 {
		var lat Lat
		for _, c := range cs {
			lat.AddAll(c.lat)
		}
		res.Lat = lat.Summary()
	}
	return res, nil
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
