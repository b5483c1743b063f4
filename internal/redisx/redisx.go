// Package redisx is chatd's Redis plumbing, written once: running Lua
// scripts in pipelines with the NOSCRIPT fallback. Every domain package
// that pipelines scripts goes through Pipelined; a single script call goes
// through Run (go-redis's Script.Run, which already falls back to EVAL).
// Scripts are made with NewScript, which names them for the Redis metrics.
// It also holds the bounds of a call made safe to send twice by a record
// of it (CallID, CallBound, CallRecordTTL: call.go says why).
//
// Why it exists: EVALSHA is answered NOSCRIPT by a server that does not
// hold the script — restarted, freshly promoted from a replica that never
// ran it, or after SCRIPT FLUSH. A command answered NOSCRIPT did nothing,
// so it is safe to send again; anything else that pipeline did stands.
// Pipelined therefore re-sends exactly the NOSCRIPT'ed scripts, in their
// order, as EVAL with the source (which also caches the script), in one
// second pipeline, and fills the caller's command handles with the new
// answers. The naive versions fail: re-running the whole pipeline applies
// the commands that did succeed twice, and loading the script and then
// re-sending EVALSHA races a second flush or a Cluster master change.
//
// One ordering caveat, inherent to NOSCRIPT: if the script cache comes
// back (another client's EVAL) while a pipeline is being executed, an
// earlier EVALSHA may be answered NOSCRIPT and a later one run; re-sending
// the earlier one places it after the later one. The writes chatd sends
// this way carry idempotency keys, so none is applied twice; such a
// reordering needs a script cache reload to land inside one pipeline.
//
// The package's tests also hold a rule for every .lua file of the module
// (lua_keys_test.go): a script builds no key name — every key it touches
// comes in KEYS, so that Redis Cluster checks them all before it runs.
package redisx

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// Run runs one script: EVALSHA, and EVAL with the source on NOSCRIPT.
func Run(ctx context.Context, rdb redis.Scripter, s *redis.Script, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, rdb, keys, args...)
}

// IsNoScript reports whether err is Redis's NOSCRIPT reply.
func IsNoScript(err error) bool {
	return err != nil && (errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT"))
}

// Pipe is a pipeline that knows which of its commands are scripts.
type Pipe struct {
	redis.Pipeliner
	ctx    context.Context
	evals  []eval
	after  func(redis.Pipeliner)
	resent map[*redis.Cmd]bool
}

type eval struct {
	s    *redis.Script
	keys []string
	args []any
	cmd  *redis.Cmd
}

// Script queues s as EVALSHA and returns its command; after Pipelined
// returns, the command holds the script's answer (from the EVAL re-send if
// the first was NOSCRIPT).
func (p *Pipe) Script(s *redis.Script, keys []string, args ...any) *redis.Cmd {
	cmd := s.EvalSha(p.ctx, p.Pipeliner, keys, args...)
	p.evals = append(p.evals, eval{s, keys, args, cmd})
	return cmd
}

// AfterRetry sets commands to queue behind the re-sent scripts, should
// there be any (a WAIT that must follow them on their connection). fn gets
// the retry pipeline; its commands' answers are the caller's to read. While
// fn runs, Resent tells which scripts are being re-sent.
func (p *Pipe) AfterRetry(fn func(redis.Pipeliner)) { p.after = fn }

// Resent reports whether cmd, a command returned by Script, is re-sent in
// the retry pipeline (it was answered NOSCRIPT); false before the retry.
// Its answer then is the retry's.
func (p *Pipe) Resent(cmd *redis.Cmd) bool { return p.resent[cmd] }

// Pipelined runs fn's commands in one pipeline, then re-sends the scripts
// answered NOSCRIPT (see the package doc). It returns the first error of
// the commands, as go-redis's Pipelined does; read each command's own
// error for its result.
func Pipelined(ctx context.Context, rdb redis.Cmdable, fn func(p *Pipe)) error {
	p := &Pipe{Pipeliner: rdb.Pipeline(), ctx: ctx}
	fn(p)
	_, err := p.Exec(ctx)
	var again []eval
	for _, e := range p.evals {
		if IsNoScript(e.cmd.Err()) {
			again = append(again, e)
		}
	}
	if len(again) == 0 {
		return err
	}
	retry := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(again))
	p.resent = make(map[*redis.Cmd]bool, len(again))
	for i, e := range again {
		cmds[i] = e.s.Eval(ctx, retry, e.keys, e.args...)
		p.resent[e.cmd] = true
	}
	if p.after != nil {
		p.after(retry)
	}
	_, _ = retry.Exec(ctx) // each answer lands in its command below
	for i, e := range again {
		e.cmd.SetErr(cmds[i].Err())
		e.cmd.SetVal(cmds[i].Val())
	}
	for _, e := range p.evals {
		if e.cmd.Err() != nil && !errors.Is(e.cmd.Err(), redis.Nil) {
			return e.cmd.Err()
		}
	}
	return nil
}
