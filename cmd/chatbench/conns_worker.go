package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The conns scenario's generator is split into worker processes, because
// one process may hold at most 20,000 open files on the machines chatbench
// runs on (a hard limit): chatbench re-executes itself with -serve-conns,
// and each worker holds at most -conns-cap WebSockets. The parent writes
// plans to a worker's stdin and reads its answers from its stdout, one
// JSON object a line; a worker exits when its stdin closes (the parent
// ended, or closed it), so none outlives a run.

// connsPlan is one command from the parent to a worker.
type connsPlan struct {
	Cmd string `json:"cmd"` // "connect", "say" or "close"

	// connect: users First … First+Count-1 of the run, named Prefix+"u"+i,
	// user i on Bases[i%len(Bases)], joining lobby Lobby+"l"+(i/LobbySize);
	// dialled from the source addresses Src in turn. Session: create a
	// guest session first (chatd); without, the token is the user's name
	// (the bare hub). Query is added to the /ws URL.
	Prefix    string            `json:"prefix,omitempty"`
	First     int               `json:"first,omitempty"`
	Count     int               `json:"count,omitempty"`
	Bases     []string          `json:"bases,omitempty"`
	Lobby     string            `json:"lobby,omitempty"`
	LobbySize int               `json:"lobby_size,omitempty"`
	Src       []string          `json:"src,omitempty"`
	Session   bool              `json:"session,omitempty"`
	Query     map[string]string `json:"query,omitempty"`
	Parallel  int               `json:"parallel,omitempty"`

	// say: the worker's users at these local indices each send one say to
	// their room whose text is "cw "+Tag+" "+<send time in unix ns>; every
	// user of the worker waits (at most WaitMS) for that one message of its
	// room.
	Senders []int  `json:"senders,omitempty"`
	Tag     string `json:"tag,omitempty"`
	WaitMS  int    `json:"wait_ms,omitempty"`
}

// connsMsg is one answer of a worker: progress while connecting, or the
// result of a plan.
type connsMsg struct {
	Type string `json:"type"` // "progress", "connected", "wave", "closed" or "error"

	Done        int      `json:"done,omitempty"`         // progress, connected: users connected and seated
	Rooms       []string `json:"rooms,omitempty"`        // connected: each local user's room ("" if it failed)
	Failures    int      `json:"failures,omitempty"`     // connected: users that failed; wave: says refused
	FirstErrors []string `json:"first_errors,omitempty"` // the first few errors

	Lat       []int64 `json:"lat,omitempty"`        // wave: send→receive of each delivery, ns
	Missing   int     `json:"missing,omitempty"`    // wave: users without their room's message
	Dups      int     `json:"dups,omitempty"`       // wave: deliveries beyond the first of a user
	Wrong     int     `json:"wrong,omitempty"`      // wave: messages of another room
	Dropped   int     `json:"dropped,omitempty"`    // connections the server closed so far
	FirstSend int64   `json:"first_send,omitempty"` // wave: the worker's first say, unix ns
	LastRecv  int64   `json:"last_recv,omitempty"`  // wave: its last delivery, unix ns
	Err       string  `json:"err,omitempty"`        // error: why the plan failed
}

// connsUser is one user a worker holds: its connection and what its reader
// saw of the wave.
type connsUser struct {
	ws    *WS
	room  string
	got   atomic.Int32 // wave messages of its room
	wrong atomic.Int32 // wave messages of another room
	lat   atomic.Int64 // send→receive of the first, ns
	at    atomic.Int64 // when it arrived, unix ns
	fail  atomic.Value // string: an error frame answering the say
	tag   atomic.Value // string: the wave tag of the first wave message it got
	done  chan struct{}
}

// connsWorker is the state of one -serve-conns process.
type connsWorker struct {
	out     *json.Encoder
	outMu   sync.Mutex
	users   []*connsUser
	dropped atomic.Int32
}

// send writes one answer line to the parent.
func (cw *connsWorker) send(m connsMsg) {
	cw.outMu.Lock()
	defer cw.outMu.Unlock()
	_ = cw.out.Encode(m)
}

// runConnsWorker serves plans from in until it closes or ctx ends, then
// closes every connection it holds.
func runConnsWorker(ctx context.Context, in io.Reader, out io.Writer) error {
	raiseFileLimit()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cw := &connsWorker{out: json.NewEncoder(out)}
	defer cw.closeAll()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var p connsPlan
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return fmt.Errorf("plan %.80q: %w", sc.Bytes(), err)
		}
		var err error
		switch p.Cmd {
		case "connect":
			err = cw.connect(ctx, p)
		case "say":
			err = cw.wave(ctx, p)
		case "close":
			cw.closeAll()
			cw.send(connsMsg{Type: "closed"})
		default:
			err = fmt.Errorf("unknown command %q", p.Cmd)
		}
		if err != nil {
			cw.send(connsMsg{Type: "error", Err: err.Error()})
		}
	}
	return sc.Err() // nil at EOF: the parent is done (or gone)
}

// closeAll closes every connection and waits for their readers.
func (cw *connsWorker) closeAll() {
	for _, u := range cw.users {
		if u != nil && u.ws != nil {
			u.ws.Close()
			<-u.done
		}
	}
	cw.users = nil
	cw.dropped.Store(0)
}

// connect opens p.Count users' WebSockets, each seated in its lobby, and
// answers "connected" with each one's room.
func (cw *connsWorker) connect(ctx context.Context, p connsPlan) error {
	if len(cw.users) > 0 {
		return errors.New("connect: still holding connections (close first)")
	}
	if p.Count < 1 || len(p.Bases) == 0 || len(p.Src) == 0 || p.LobbySize < 1 {
		return fmt.Errorf("connect: bad plan (count %d, %d bases, %d source addresses, lobby size %d)", p.Count, len(p.Bases), len(p.Src), p.LobbySize)
	}
	dialers := make([]*net.Dialer, len(p.Src))
	for i, s := range p.Src {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("connect: source address %q", s)
		}
		dialers[i] = &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
	}
	// sessions over keep-alive connections from the first source address
	api := newAPI(p.Parallel, "")
	api.hc.Transport.(*http.Transport).DialContext = (&net.Dialer{Timeout: 5 * time.Second, LocalAddr: dialers[0].LocalAddr}).DialContext
	defer api.hc.CloseIdleConnections()
	q := url.Values{}
	for k, v := range p.Query {
		q.Set(k, v)
	}
	cw.users = make([]*connsUser, p.Count)
	var (
		done, failed atomic.Int32
		errMu        sync.Mutex
		firstErrs    []string
	)
	stop := make(chan struct{})
	go func() { // progress, once a second
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				cw.send(connsMsg{Type: "progress", Done: int(done.Load())})
			}
		}
	}()
	_ = parallel(ctx, p.Count, max(1, p.Parallel), func(k int) error {
		i := p.First + k
		user := p.Prefix + "u" + strconv.Itoa(i)
		base := p.Bases[i%len(p.Bases)]
		u, err := cw.open(ctx, api, dialers[k%len(dialers)], base, user, p.Lobby+"l"+strconv.Itoa(i/p.LobbySize), p.Session, q)
		if err != nil {
			failed.Add(1)
			errMu.Lock()
			if len(firstErrs) < 5 {
				firstErrs = append(firstErrs, fmt.Sprintf("%s on %s: %v", user, base, err))
			}
			errMu.Unlock()
			return nil // count it, go on with the others
		}
		cw.users[k] = u
		done.Add(1)
		return nil
	})
	close(stop)
	rooms := make([]string, p.Count)
	for k, u := range cw.users {
		if u != nil {
			rooms[k] = u.room
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	cw.send(connsMsg{Type: "connected", Done: int(done.Load()), Rooms: rooms, Failures: int(failed.Load()), FirstErrors: firstErrs})
	return nil
}

// open creates user's session (if session), opens its WebSocket to base
// through d, joins lobby and starts its reader.
func (cw *connsWorker) open(ctx context.Context, api *API, d *net.Dialer, base, user, lobby string, session bool, q url.Values) (*connsUser, error) {
	tok := user
	if session {
		var err error
		if tok, err = api.Session(ctx, base, user); err != nil {
			return nil, err
		}
	}
	ws, _, err := dialWSVia(ctx, d, base, tok, q)
	if err != nil {
		return nil, err
	}
	room, err := ws.Join(lobby)
	if err != nil {
		ws.Close()
		return nil, err
	}
	u := &connsUser{ws: ws, room: room.ID, done: make(chan struct{})}
	go cw.read(u)
	return u, nil
}

// read reads u's events until its connection ends: a wave message of u's
// room is timed by the send time its text carries, an error frame is kept
// (it answers the say), everything else is skipped.
func (cw *connsWorker) read(u *connsUser) {
	defer close(u.done)
	var f Frame
	for {
		ev, err := u.ws.NextEvent()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				cw.dropped.Add(1)
			}
			return
		}
		if !strings.Contains(string(ev), `"cw `) && !strings.Contains(string(ev), `"error"`) {
			continue // idle traffic (presence…): not decoded
		}
		now := time.Now()
		if err := decodeFrame(ev, &f); err != nil {
			continue
		}
		switch f.Type {
		case "error":
			u.fail.Store(f.Code + ": " + f.ErrText)
		case "message":
			// "cw <tag> <send time>": recorded whatever the tag, since
			// another worker's senders may say before this worker has
			// its wave plan; wave compares the tag.
			tag, sentText, ok := strings.Cut(strings.TrimPrefix(f.Msg.Text, "cw "), " ")
			if !ok || !strings.HasPrefix(f.Msg.Text, "cw ") {
				continue
			}
			if f.Msg.Room != u.room {
				u.wrong.Add(1)
				continue
			}
			if u.got.Add(1) == 1 {
				sent, _ := strconv.ParseInt(sentText, 10, 64)
				u.tag.Store(tag)
				u.lat.Store(now.UnixNano() - sent)
				u.at.Store(now.UnixNano())
			}
		}
	}
}

// wave sends one say from each of p.Senders, waits until every user has
// its room's message (or p.WaitMS), and answers "wave".
func (cw *connsWorker) wave(ctx context.Context, p connsPlan) error {
	var m connsMsg
	m.Type = "wave"
	for _, k := range p.Senders {
		if k < 0 || k >= len(cw.users) || cw.users[k] == nil {
			return fmt.Errorf("say: no user %d", k)
		}
		u := cw.users[k]
		now := time.Now().UnixNano()
		if m.FirstSend == 0 {
			m.FirstSend = now
		}
		txt := "cw " + p.Tag + " " + strconv.FormatInt(now, 10)
		if err := u.ws.Send(map[string]string{"type": "say", "room": u.room, "text": txt, "ref": "cw"}); err != nil {
			m.Failures++
			if len(m.FirstErrors) < 5 {
				m.FirstErrors = append(m.FirstErrors, err.Error())
			}
		}
	}
	complete := func() bool {
		for _, u := range cw.users {
			if u != nil && u.got.Load() == 0 {
				return false
			}
		}
		return true
	}
	waitFor(ctx, time.Duration(p.WaitMS)*time.Millisecond, complete)
	time.Sleep(200 * time.Millisecond) // a duplicate would come right after
	for _, u := range cw.users {
		if u == nil {
			continue
		}
		if s, ok := u.fail.Load().(string); ok {
			m.Failures++
			if len(m.FirstErrors) < 5 {
				m.FirstErrors = append(m.FirstErrors, s)
			}
		}
		m.Wrong += int(u.wrong.Load())
		if tag, _ := u.tag.Load().(string); tag != "" && tag != p.Tag {
			m.Wrong++ // a message of another wave
			continue
		}
		switch n := int(u.got.Load()); n {
		case 0:
			m.Missing++
		default:
			m.Dups += n - 1
			m.Lat = append(m.Lat, u.lat.Load())
			m.LastRecv = max(m.LastRecv, u.at.Load())
		}
	}
	m.Dropped = int(cw.dropped.Load())
	cw.send(m)
	return nil
}

// serveConns is the -serve-conns process: plans on stdin, answers on
// stdout, until stdin closes.
func serveConns(ctx context.Context) error {
	return runConnsWorker(ctx, os.Stdin, os.Stdout)
}
