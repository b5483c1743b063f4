package rooms

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// SendMany sends several messages, in order: the send scripts reach Redis
// in the order given, so one client's says are stored in the order sent
// without each waiting for the previous one's answer. Each reply is what
// Send would have answered for that message alone.
//
// Says of concurrent calls share round trips (a group commit, node-wide:
// see "one round trip for the says of many callers" in the package doc):
// while one send commit is in flight, the calls that come in wait, and the
// next commit carries all of them; a call on an idle node goes out at
// once. A commit is one pipeline with one script call per lobby for the
// says of that lobby, in the order the calls came and each call's says in
// its order — so a call's says are stored in order, and a caller's next
// call, made after this one returned, comes after them. On a Redis that
// is not a Cluster that is the commit's one round trip: the script claims
// the keyed says' keys and counts the says too. On a Cluster the claims
// (one SET each, in the user's slot) are a round trip before it, and the
// counter's script rides in the pipeline. With Config.Durability "replica" one WAIT
// follows the scripts on each connection (per lobby's master on a Redis
// Cluster), and a reply whose message no replica acknowledged carries its
// result and an error wrapping ErrNotReplicated, as Send.
//
// A request with a Key is idempotent: if Redis applies the call twice (the
// client retried the pipeline after a read timeout while the first one was
// still to run) or the caller sends it again (after a reconnect), it is
// stored and published once; see SendRequest.Key and SendResult.Duplicate.
// A say without a key is still stored once however often go-redis sends
// the pipeline; a second call is a second say.
//
// The global message counter (Counters) counts each say the send script
// stores, in the script, on a Redis that is not a Cluster. On a Cluster
// it is added to in the same pipeline, once per commit (a token in the
// counter's slot makes a re-run pipeline add nothing), by the number of
// says sent; the ones Redis definitely did not send (refused, duplicates,
// Redis error replies) are taken back after the replies, in a second
// round trip only then. A say whose answer was lost (a timeout) stays
// counted.
//
// ctx bounds the caller's wait: a call whose ctx ends while its says wait
// for a commit sends nothing and answers ctx's error; once its says are in
// a commit, the commit runs to its end (bounded by the latest deadline of
// the calls it carries) and the call answers what Redis did.
func (s *Messages) SendMany(ctx context.Context, reqs []SendRequest, opt SendOptions) []SendReply {
	out := make([]SendReply, len(reqs))
	job := &sendJob{ctx: ctx, ps: make([]prepared, len(reqs)), done: make(chan struct{})}
	live := 0
	for i, r := range reqs {
		job.ps[i] = s.prepare(r, opt)
		if job.ps[i].err == nil {
			live++
		}
	}
	if live > 0 {
		start := time.Now()
		s.q.send(s, job)
		s.m.sendSeconds.Observe(time.Since(start).Seconds())
	}
	for i := range out {
		out[i] = job.ps[i].reply
		if err := job.ps[i].err; err != nil {
			out[i].Err = fmt.Errorf("rooms: send to %s as %s: %w", reqs[i].Room, reqs[i].User, err)
		}
	}
	return out
}

// countedTTL is how long a send commit's counter token is kept: longer
// than a client's retries of one pipeline take.
const countedTTL = time.Minute

// A say sent without a key is recorded under the key "~<call>/<index>"
// for redisx.CallRecordTTL (about 150 bytes of Redis memory per say for
// that long), and every send commit ends within redisx.CallBound of its
// start (commitContext), so that go-redis's retry of a commit's pipeline
// finds the first copy's records (or countedTTL's token) and is not
// applied twice. A WebSocket say's own deadline is as long.

// maxCommitSays bounds the says of one send commit (calls that come in
// meanwhile wait for the next), and maxScriptSays those of one script
// call: a script blocks Redis while it runs.
const (
	maxCommitSays = 1024
	maxScriptSays = 64
)

// prepared is one say of a SendMany call: checked by prepare, its script
// arguments built by commit.
type prepared struct {
	m           Message
	lobby       string
	seq         int
	key         string // the caller's idempotency key; "" for none
	rate, burst float64
	role        string // "system" when no seat is checked
	hash        string // the text's, hex

	tag     string     // "<call>/<index>": this say in its commit
	cmd     *redis.Cmd // the script call of its lobby's says
	at      int        // its place in cmd's reply
	wait    *redis.IntCmd
	refresh string // the history ("lobby/seq") whose TTL this say refreshes; "" when it does not
	// claim and bound bind the caller's key to this message in every lobby
	// (claimKey); "" for a say without a key.
	claim, bound string

	reply SendReply
	err   error
}

func (s *Messages) prepare(r SendRequest, opt SendOptions) prepared {
	lobby, seq, err := ParseRoom(r.Room)
	if opt.System || opt.Server && r.User == "" {
		r.User = SystemSender
	} else if err == nil {
		err = names.User(r.User)
	}
	if err == nil && (r.Text == "" || !utf8.ValidString(r.Text)) {
		err = ErrBadText
	}
	if err == nil {
		err = checkIdempotencyKey(r.Key)
	}
	if err != nil {
		return prepared{err: err}
	}
	p := prepared{m: Message{Room: r.Room, From: r.User, Text: r.Text}, lobby: lobby, seq: seq, key: r.Key,
		rate: max(opt.Rate, 0), burst: max(opt.Burst, 1)}
	if opt.System {
		p.rate, p.key = 0, "" // the system has no bucket; its say is keyed by its place in the commit
	}
	if opt.Server {
		p.rate = 0 // a backend has no say bucket (the server API limits each key)
	}
	if opt.System || opt.Server {
		p.role = "system" // no seat checked, the room must exist
	}
	sum := sha256.Sum256([]byte(r.Text))
	p.hash = hex.EncodeToString(sum[:8])
	if p.key != "" {
		p.claim, p.bound = claimKey(s.ks, r.User, p.key), r.Room+" "+p.hash
	}
	return p
}

// historyDue reports whether this node refreshes the TTL of the history of
// room seq of lobby with a send at now, and if so marks it refreshed: at
// most once per IdleTTL/48 (30 minutes at the default 24 h), as Renew's
// historiesDue does. A PEXPIRE on every send cost Redis a command per say
// for a TTL of a day; between refreshes the history expires at most
// IdleTTL/48 sooner than the last say + IdleTTL. message_send.lua sets
// the TTL anyway on a history it creates, so none lives without one.
func (s *Messages) historyDue(now time.Time, k string) bool {
	return s.hist.due(now, k, s.idleTTL/48)
}

// historyNotRefreshed forgets the mark of historyDue for history k ("lobby/
// seq") when the say that was to refresh it was not stored (or may not
// have been): the next say there refreshes it.
func (s *Messages) historyNotRefreshed(k string) { s.hist.forget(k) }

// sendQueue is the group commit of says: the SendMany calls waiting for
// the commit in flight to end, and the committer that sends them. The
// committer is a goroutine that runs while there are says to send: the
// first call to a quiet node starts it (it runs at once, on the caller's
// core, while the caller waits), and it takes the says of every call
// waiting then, commits them, answers them, and takes the next ones at
// once, until none wait. So nothing waits on a timer, an idle node sends
// a say at once, and on a busy node the next commit goes out as soon as
// the last one is answered.
//
// It was a leader once: the caller that found no commit in flight ran it,
// and handed the next to the first call that came in meanwhile. The
// hand-over cost a goroutine switch per commit, and on a busy node the
// next leader waited for a CPU before it could send: 345 ms of the 888 ms
// that goroutines waited for one in a 4-s scheduler trace of a rooms50
// node (BENCHMARKS.md).
type sendQueue struct {
	mu      sync.Mutex
	busy    bool       // the committer runs
	waiting []*sendJob // in arrival order

	// window is Config.SendWindow; started is when the last commit
	// started, read and written by the committer only.
	window  time.Duration
	started time.Time
	sleep   func(time.Duration) // time.Sleep; tests watch it
}

// sendJob is one SendMany call's says on their way.
type sendJob struct {
	ctx   context.Context
	ps    []prepared
	done  chan struct{} // closed when every say of ps is answered
	taken bool          // in a commit (under sendQueue.mu)
}

// send queues job and returns when its says are answered, or when its ctx
// ended before they went out (then each has ctx's error and nothing of it
// was sent).
func (q *sendQueue) send(s *Messages, job *sendJob) {
	q.mu.Lock()
	q.waiting = append(q.waiting, job)
	s.m.sendWaiting.Set(float64(len(q.waiting)))
	if !q.busy {
		q.busy = true
		go q.commits(s)
	}
	q.mu.Unlock()
	select {
	case <-job.done:
		return
	case <-job.ctx.Done():
	}
	q.mu.Lock()
	if !job.taken {
		for i, j := range q.waiting {
			if j == job {
				q.waiting = append(q.waiting[:i], q.waiting[i+1:]...)
				break
			}
		}
		s.m.sendWaiting.Set(float64(len(q.waiting)))
		q.mu.Unlock()
		for k := range job.ps {
			if job.ps[k].err == nil {
				job.ps[k].err = job.ctx.Err()
			}
		}
		return
	}
	q.mu.Unlock()
	<-job.done // in a commit: it answers
}

// commits is the committer: it takes the waiting calls (up to
// maxCommitSays says, at least one call), commits their says, answers
// them, and goes on with the calls that came meanwhile; it ends when none
// wait.
func (q *sendQueue) commits(s *Messages) {
	for {
		if s.beforeCommit != nil {
			s.beforeCommit()
		}
		q.linger()
		q.mu.Lock()
		if len(q.waiting) == 0 { // their contexts ended while they waited
			q.busy = false
			q.mu.Unlock()
			return
		}
		n, says := 0, 0
		for n < len(q.waiting) && (n == 0 || says+len(q.waiting[n].ps) <= maxCommitSays) {
			q.waiting[n].taken = true
			says += len(q.waiting[n].ps)
			n++
		}
		jobs := append([]*sendJob(nil), q.waiting[:n]...)
		q.waiting = append(q.waiting[:0], q.waiting[n:]...)
		s.m.sendWaiting.Set(float64(len(q.waiting)))
		q.mu.Unlock()

		s.m.commitSays.Observe(float64(says))
		s.commit(jobs)
		for _, j := range jobs {
			close(j.done)
		}

		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.busy = false
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
	}
}

// linger waits out the send window (Config.SendWindow) since the last
// commit started, unless a full script call's says are waiting already,
// and marks this commit started. On a node whose commits follow each
// other closely (says come faster than Redis answers a commit) each
// commit then carries the says of a window, not of one round trip: the
// cost of a script call — its read and its write, the script's setup, the
// call's INCRBY and its EXISTS of the lobby's REST users (and, in a lobby
// that has some, each room's ZCOUNT once) — is shared by more says. A node
// whose last commit started a window ago or more waits for nothing.
func (q *sendQueue) linger() {
	if q.window <= 0 {
		return
	}
	if wait := time.Until(q.started.Add(q.window)); wait > 0 {
		q.mu.Lock()
		says := 0
		for _, j := range q.waiting {
			says += len(j.ps)
		}
		q.mu.Unlock()
		if says < maxScriptSays {
			q.sleep(wait)
		}
	}
	q.started = time.Now()
}

// commitContext is the context of a commit of jobs that starts at start:
// no job's cancellation stops the others' says, and it ends at the latest
// of their deadlines, and redisx.CallBound after start at the latest (a REST
// request's context has no deadline).
func commitContext(jobs []*sendJob, start time.Time) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(jobs[0].ctx)
	var last time.Time
	for _, j := range jobs {
		d, ok := j.ctx.Deadline()
		if !ok {
			last = time.Time{}
			break
		}
		if d.After(last) {
			last = d
		}
	}
	if bound := start.Add(redisx.CallBound); last.IsZero() || last.After(bound) {
		last = bound
	}
	return context.WithDeadline(ctx, last)
}

// commit sends the says of jobs in one send commit and fills in each
// say's reply or error.
func (s *Messages) commit(jobs []*sendJob) {
	ctx, cancel := commitContext(jobs, time.Now())
	defer cancel()
	now := time.UnixMilli(s.now().UnixMilli()).UTC() // as History reads it back
	call := redisx.CallID()
	var ps []*prepared
	for _, j := range jobs {
		for i := range j.ps {
			p := &j.ps[i]
			if p.err == nil {
				p.tag = call + "/" + strconv.Itoa(len(ps))
				p.m.TS = now
				ps = append(ps, p)
			}
		}
	}
	// On a Redis that is not a Cluster every key may be in one script: the
	// send script claims the keys and counts the says itself, and a
	// commit is one round trip. On a Cluster the claims (the user's slot)
	// go first, and the counter (its own slot) rides in the pipeline.
	live := ps
	if s.cluster {
		live = s.bindKeys(ctx, ps)
	}
	for _, p := range ps {
		if p.err != nil {
			p.reply.Err = p.err
		}
	}
	if len(live) == 0 {
		return
	}
	// Each lobby's says, in order, in script calls of at most
	// maxScriptSays; lobbies in the order their first say came. A call's
	// says share their say rate and bucket size (its arguments, not each
	// say's): the says of a lobby with another rate (the system's and the
	// backend's have none) go in a call of their own.
	type group struct {
		keys []string
		args []any
		ps   []*prepared
	}
	var groups []*group
	type callOf struct {
		lobby       string
		rate, burst float64
	}
	callFor := func(p *prepared) callOf {
		if p.rate == 0 {
			return callOf{lobby: p.lobby} // no bucket: its size is not read
		}
		return callOf{p.lobby, p.rate, p.burst}
	}
	left := map[callOf]int{} // each call's says not yet in a group
	for _, p := range live {
		left[callFor(p)]++
	}
	open := map[callOf]*group{}
	durable := s.durable()
	for _, p := range live {
		c := callFor(p)
		g := open[c]
		if g == nil || len(g.ps) == maxScriptSays {
			// sized for its says (and the counter's key): not grown say by say
			says := min(left[c], maxScriptSays)
			left[c] -= says
			g = &group{
				keys: append(make([]string, 0, 4+4*says+1), roomsKey(s.ks, p.lobby), membersKey(s.ks, p.lobby), leasesKey(s.ks, p.lobby), restKey(s.ks, p.lobby)),
				args: append(make([]any, 0, 12+8*says), now.UnixMilli(), s.historyMax, s.publish, s.idleTTL.Milliseconds(), eventStart, channelPrefix(s.ks, p.lobby), call, inScript(!s.cluster),
					s.claimMode(now), p.rate, p.burst, p.lobby+"-"),
			}
			open[c] = g
			groups = append(groups, g)
		}
		s.addSay(&g.keys, &g.args, p, now, !s.cluster, durable)
		p.at = len(g.ps)
		g.ps = append(g.ps, p)
	}
	countKeys := []string{messagesTotalKey(s.ks), countedKey(s.ks, call)}
	var counted *redis.Cmd
	var chunks [][]*prepared // each script call's says
	n := 0
	for _, g := range groups {
		if len(g.ps) > 0 {
			chunks = append(chunks, g.ps)
			n += len(g.ps)
		}
	}
	if n == 0 {
		return
	}
	// Errors are read per command below. A server without a script
	// (restarted, or a replica just promoted) answers NOSCRIPT and runs
	// nothing: redisx sends those again, behind a WAIT of their own.
	_ = redisx.Pipelined(ctx, s.rdb, func(pipe *redisx.Pipe) {
		for _, g := range groups {
			if len(g.ps) == 0 {
				continue
			}
			keys := g.keys
			if !s.cluster {
				keys = append(keys, messagesTotalKey(s.ks))
			}
			cmd := pipe.Script(messageSendScript, keys, g.args...)
			for _, p := range g.ps {
				p.cmd = cmd
			}
		}
		if durable {
			s.queueWaits(ctx, pipe, chunks)
			pipe.AfterRetry(func(retry redis.Pipeliner) {
				var again [][]*prepared
				for _, c := range chunks {
					if pipe.Resent(c[0].cmd) {
						again = append(again, c)
					}
				}
				if len(again) > 0 {
					s.queueWaits(ctx, retry, again)
				}
			})
		}
		if s.cluster {
			counted = pipe.Script(counterAddScript, countKeys, n, countedTTL.Milliseconds())
		}
	})
	notSent := 0
	for _, c := range chunks {
		vals, cerr := c[0].cmd.Slice()
		for _, p := range c {
			var stored bool
			p.reply.SendResult, stored, p.err = s.sendReply(p, vals, cerr, len(c) > 1)
			if !stored && p.refresh != "" {
				s.historyNotRefreshed(p.refresh)
			}
			// A duplicate answers an earlier call's message, which may
			// still be on the master alone (that call answered
			// ErrNotReplicated): it is acked on the same terms as the
			// first, once a replica holds it. Its script rewrote its
			// record (flag d), so the WAIT covers it on any Redis.
			if (stored || p.reply.Duplicate) && durable {
				p.err = s.replicated(p)
			}
			switch {
			case stored:
				s.m.sent.Inc()
			case p.reply.Duplicate || definite(p.err):
				notSent++
			}
		}
	}
	for _, p := range ps {
		p.reply.Err = p.err
	}
	switch {
	case counted == nil: // the send scripts counted what they stored
	case counted.Err() != nil:
		s.m.counterErrors.Inc()
	case notSent > 0: // counted says that were not sent: take them back, once
		keys := []string{messagesTotalKey(s.ks), countedKey(s.ks, call+":back")}
		if err := redisx.Run(ctx, s.rdb, counterAddScript, keys, -notSent, countedTTL.Milliseconds()).Err(); err != nil {
			s.m.counterErrors.Inc()
		}
	}
}

// inScript is message_send.lua's flag for "the script does it" ("1"), or
// not ("").
func inScript(yes bool) string {
	if yes {
		return "1"
	}
	return ""
}

// addSay appends p's keys and arguments to its lobby's script call
// (message_send.lua, whose event starts eventStart); the message's ts is
// now. claim says whether the script claims p's key (a Redis that is not
// a Cluster; on a Cluster bindKeys did).
func (s *Messages) addSay(keys *[]string, args *[]any, p *prepared, now time.Time, claim, durable bool) {
	// A say without a key is keyed by its place in this commit, for
	// redisx.CallRecordTTL: go-redis's retry of the pipeline after a read timeout
	// (the first copy may have run) is then answered by the first copy's
	// record, not stored twice. Another commit is another say.
	key, ttl := p.key, s.idemTTL
	if key == "" {
		key, ttl = "~"+p.tag, redisx.CallRecordTTL
	}
	var flags int
	if p.role == "system" {
		flags |= sayFlagSystem
	}
	_, i, _ := cutLast(p.tag, '/')
	said := saidKey(s.ks, p.lobby, p.m.From, key)
	claimKey := said
	if claim && p.claim != "" {
		claimKey = p.claim
		flags |= sayFlagKey
	}
	if durable {
		flags |= sayFlagDurable
	}
	if k := p.lobby + "/" + strconv.Itoa(p.seq); s.historyDue(now, k) {
		flags |= sayFlagRefresh
		p.refresh = k
	}
	*keys = append(*keys, historyKey(s.ks, p.lobby, p.seq), rateKey(s.ks, p.lobby, p.m.From), said, claimKey)
	*args = append(*args, p.seq, p.m.From, p.m.Text, eventAfterID(p.m), ttl.Milliseconds(), p.hash, i, sayFlags[flags])
}

// message_send.lua's flags of a say (its +8): s, no seat checked (the
// system's or the backend's say); k, its key is bound in the script; r,
// the history's TTL is refreshed; d, a WAIT follows (Config.Durability
// "replica"): a replay rewrites its record, so that the WAIT covers a
// write of its own connection. One argument rather than four: each is a
// string Redis parses and Lua interns.
const (
	sayFlagSystem = 1 << iota
	sayFlagKey
	sayFlagRefresh
	sayFlagDurable
)

// sayFlags spells each set of flags, each made an interface value once:
// a say's argument then costs no allocation.
var sayFlags = func() (a [16]any) {
	for i, f := range [16]string{"", "s", "k", "sk", "r", "sr", "kr", "skr",
		"d", "sd", "kd", "skd", "rd", "srd", "krd", "skrd"} {
		a[i] = f
	}
	return a
}()

// cutLast slices s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// bindKeys binds each keyed say of ps to its message in every lobby, in one
// round trip before the send scripts (on a Cluster: elsewhere the send
// script claims), and returns the says that may be sent: a key bound to another
// room's or text's message fails with ErrIdempotencyMismatch, a claim that
// Redis did not answer with its error (then nothing is sent). The send
// script's record, in the lobby's slot, catches a key reused within the
// lobby; this catches it across lobbies. Each claim is one SET NX GET
// (Redis 7.0): it binds a free key and answers the message a bound one
// is bound to; a claim Redis applied twice (a retry after a timeout)
// finds itself and passes.
func (s *Messages) bindKeys(ctx context.Context, ps []*prepared) []*prepared {
	cmds := map[*prepared]*redis.StatusCmd{}
	for _, p := range ps {
		if p.claim != "" {
			cmds[p] = nil
		}
	}
	if len(cmds) > 0 {
		_ = redisx.Pipelined(ctx, s.rdb, func(pipe *redisx.Pipe) {
			for _, p := range ps {
				if p.claim != "" {
					cmds[p] = pipe.SetArgs(ctx, p.claim, p.bound, redis.SetArgs{Mode: "NX", Get: true, TTL: s.idemTTL})
				}
			}
		})
	}
	var ok []*prepared
	for _, p := range ps {
		if cmd := cmds[p]; cmd != nil {
			v, err := cmd.Result()
			switch {
			case errors.Is(err, redis.Nil): // bound now
			case err != nil:
				p.err = err
				continue
			case v != p.bound:
				p.err = ErrIdempotencyMismatch
				continue
			}
		}
		ok = append(ok, p)
	}
	return ok
}

// sendReply reads p's answer in vals, its script call's reply (or the
// call's error cerr). stored is true when this commit stored the message:
// now, or in an earlier run of this commit's pipeline that Redis applied
// before this one (the say's record says so). shared is true when the
// call carried other says too: a Redis error then may have come after
// some of them were stored, so it is not taken as definite.
func (s *Messages) sendReply(p *prepared, vals []any, cerr error, shared bool) (r SendResult, stored bool, err error) {
	if cerr != nil {
		var rerr redis.Error
		if shared && errors.As(cerr, &rerr) {
			return SendResult{}, false, fmt.Errorf("%w (a script call of several says: some may have been sent)", errPartial{cerr})
		}
		return SendResult{}, false, cerr
	}
	if p.at >= len(vals) {
		return SendResult{}, false, errUnexpectedReply
	}
	v, _ := vals[p.at].([]any)
	if len(v) == 0 {
		return SendResult{}, false, errUnexpectedReply
	}
	if id, ok := v[0].(string); ok && len(v) == 2 {
		rest, _ := v[1].(int64)
		m := p.m
		m.ID, err = padID(id)
		return SendResult{Message: m, HasREST: rest > 0}, err == nil, err
	}
	switch v[0] {
	case int64(0):
		return SendResult{}, false, ErrNotSeated
	case int64(-1):
		return SendResult{}, false, ErrUnknownRoom
	case int64(-2):
		wait := time.Millisecond
		if len(v) == 2 {
			if n, ok := v[1].(int64); ok && n > 1 {
				wait = time.Duration(n) * time.Millisecond
			}
		}
		return SendResult{}, false, &RateLimitError{RetryAfter: wait}
	case int64(-3):
		return SendResult{}, false, ErrIdempotencyMismatch
	case int64(-4):
		if len(v) == 5 {
			id, _ := v[1].(string)
			tsStr, _ := v[2].(string)
			tag, _ := v[3].(string)
			rest, _ := v[4].(int64)
			ts, terr := strconv.ParseInt(tsStr, 10, 64)
			m := p.m
			m.ID, err = padID(id)
			if err == nil && terr == nil {
				m.TS = time.UnixMilli(ts).UTC()
				replay := tag == p.tag
				return SendResult{Message: m, HasREST: rest > 0, Duplicate: !replay}, replay, nil
			}
		}
	}
	return SendResult{}, false, fmt.Errorf("%w %v", errUnexpectedReply, v)
}

// errPartial wraps a Redis error reply to a script call that carried
// several says: unlike a command Redis refused whole, a script that
// failed midway keeps what it wrote before, so definite does not count
// its says as not sent. errors.Is and errors.As still see the reply.
type errPartial struct{ err error }

func (e errPartial) Error() string { return e.err.Error() }
func (e errPartial) Unwrap() error { return e.err }
