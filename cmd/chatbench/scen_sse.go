package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// sseRate is the fixed say rate of the sse scenario, messages per second
// over all senders.
const sseRate = 200

// sseReader counts what one member received: deliveries, duplicates, send
// → receive latencies (every delivery), per transport.
type sseReader struct {
	lat   *Lat
	got   atomic.Int64
	dups  atomic.Int64
	mu    sync.Mutex
	seen  map[string]bool
	order atomic.Int64 // a sender's sequence went backwards
	last  map[int]int
}

// note records one message text "sender|seq|unixnano" received now.
func (r *sseReader) note(text string) {
	parts := strings.Split(text, "|")
	if len(parts) != 3 {
		return
	}
	sender, _ := strconv.Atoi(parts[0])
	seq, _ := strconv.Atoi(parts[1])
	ns, _ := strconv.ParseInt(parts[2], 10, 64)
	r.lat.Add(time.Duration(time.Now().UnixNano() - ns))
	r.mu.Lock()
	defer r.mu.Unlock()
	key := parts[0] + "|" + parts[1]
	if r.seen[key] {
		r.dups.Add(1)
		return
	}
	r.seen[key] = true
	if prev, ok := r.last[sender]; ok && seq <= prev {
		r.order.Add(1)
	}
	r.last[sender] = seq
	r.got.Add(1)
}

// scenarioSSE: one room read over both transports. Members (the smallest
// -clients value, at most 200), half of them WebSockets and half event
// streams (GET /api/v1/events, seated by a REST join), are spread round
// robin over the nodes in one fresh lobby's room; 4 WebSocket senders say
// at sseRate messages/s in all for -dur, each text carrying its send
// time. Per transport: deliveries per second and p50/p99 send→receive
// latency (every delivery sampled); every member must get every message
// once, each sender's in order.
func (b *Bench) scenarioSSE(ctx context.Context) error {
	restore, err := b.fanSetup(ctx)
	if err != nil {
		return err
	}
	defer restore()
	members := 200
	for _, n := range b.opt.Clients {
		members = min(members, n)
	}
	const senders = 4
	if err := b.setRoomSize(ctx, members+senders); err != nil {
		return err
	}
	lobby := "sse" + b.runID
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	ws := &sseReader{lat: &Lat{}}
	sse := &sseReader{lat: &Lat{}}
	perMember := map[*sseReader][]*sseReader{}
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	b.prog.Say("sse: %d members (%d WebSocket, %d event stream) in %s", members, members-members/2, members/2, lobby)
	for i := 0; i < members; i++ {
		base := b.w.Targets[i%len(b.w.Targets)]
		user := fmt.Sprintf("%sm%d", lobby, i)
		tok, err := b.api.Session(ctx, base, user)
		if err != nil {
			return err
		}
		m := &sseReader{lat: &Lat{}, seen: map[string]bool{}, last: map[int]int{}}
		if i%2 == 0 {
			w, _, err := dialWS(ctx, base, tok)
			if err != nil {
				return err
			}
			closers = append(closers, func() { w.Close() })
			if _, err := w.Join(lobby); err != nil {
				return fmt.Errorf("sse: WebSocket member join: %w", err)
			}
			perMember[ws] = append(perMember[ws], m)
			wg.Add(1)
			go func() {
				defer wg.Done()
				var f Frame
				for w.Read(&f) == nil {
					if f.Type == "message" {
						m.note(f.Msg.Text)
					}
				}
			}()
			continue
		}
		if _, err := b.api.Do(ctx, http.MethodPost, base+"/api/v1/lobbies/"+lobby+"/join", tok, nil, nil); err != nil {
			return fmt.Errorf("sse: REST join: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("sse: open the stream: %w", err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return fmt.Errorf("sse: open the stream: %d", resp.StatusCode)
		}
		closers = append(closers, func() { resp.Body.Close() })
		joined := make(chan struct{})
		perMember[sse] = append(perMember[sse], m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			br := bufio.NewReaderSize(resp.Body, 64<<10)
			once := sync.Once{}
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				data, ok := strings.CutPrefix(string(line), "data: ")
				if !ok {
					continue
				}
				var f Frame
				if decodeFrame([]byte(data), &f) != nil {
					continue
				}
				switch f.Type {
				case "joined":
					once.Do(func() { close(joined) })
				case "message":
					m.note(f.Msg.Text)
				}
			}
		}()
		select {
		case <-joined:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("sse: stream %d never said joined", i)
		}
	}

	// senders: WebSockets that say at the fixed rate and drain what comes
	var sent atomic.Int64
	var sends []*WS
	room := ""
	for s := 0; s < senders; s++ {
		base := b.w.Targets[s%len(b.w.Targets)]
		tok, err := b.api.Session(ctx, base, fmt.Sprintf("%ss%d", lobby, s))
		if err != nil {
			return err
		}
		w, _, err := dialWS(ctx, base, tok)
		if err != nil {
			return err
		}
		closers = append(closers, func() { w.Close() })
		r, err := w.Join(lobby)
		if err != nil {
			return err
		}
		if room == "" {
			room = r.ID
		} else if r.ID != room {
			return fmt.Errorf("sse: senders in two rooms, %s and %s", room, r.ID)
		}
		sends = append(sends, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var f Frame
			for w.Read(&f) == nil {
			}
		}()
	}
	b.prog.Say("sse: %d senders at %d msg/s for %s", senders, sseRate, b.opt.Dur)
	t0 := time.Now()
	var sw sync.WaitGroup
	for s, w := range sends {
		sw.Add(1)
		go func() {
			defer sw.Done()
			tick := time.NewTicker(time.Second * senders / sseRate)
			defer tick.Stop()
			for seq := 0; time.Since(t0) < b.opt.Dur; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if err := w.Send(map[string]string{"type": "say", "room": room, "text": fmt.Sprintf("%d|%d|%d", s, seq, time.Now().UnixNano())}); err != nil {
					return
				}
				sent.Add(1)
			}
		}()
	}
	sw.Wait()
	// let the last deliveries land: every member has every message, or 10 s
	want := sent.Load()
	waitFor(ctx, 10*time.Second, func() bool {
		for _, ms := range perMember {
			for _, m := range ms {
				if m.got.Load() < want {
					return false
				}
			}
		}
		return true
	})
	elapsed := time.Since(t0).Seconds()
	for _, tr := range []struct {
		name string
		r    *sseReader
	}{{"WebSocket", ws}, {"event stream", sse}} {
		var got, dups, order int64
		for _, m := range perMember[tr.r] {
			got += m.got.Load()
			dups += m.dups.Load()
			order += m.order.Load()
			tr.r.lat.Merge(m.lat)
		}
		n := int64(len(perMember[tr.r]))
		s := tr.r.lat.Summary()
		b.rep.add(newRow("sse", fmt.Sprintf("%s deliveries/s, %d members, %d msg/s offered", tr.name, n, sseRate), "msg/s", []float64{float64(got) / elapsed}))
		b.rep.add(newRow("sse", tr.name+" send→receive p50", "ms", []float64{s.P50}))
		b.rep.add(newRow("sse", tr.name+" send→receive p99", "ms", []float64{s.P99}))
		b.rep.check("sse", tr.name+": every message once, in order", got == want*n && dups == 0 && order == 0,
			"%d of %d deliveries, %d duplicates, %d out of order", got, want*n, dups, order)
	}
	cancel()
	for _, c := range closers {
		c()
	}
	closers = nil
	return nil
}
