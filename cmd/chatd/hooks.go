package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/hooks"
)

// The hooks' flags (package hooks, docs/PROTOCOL.md "Hooks"). Each of
// hook-urls, hook-timeout, hook-retries, hook-failure and hook-scope is a
// list of "hook=value" entries (a bare value applies to every hook), so
// that one flag, one variable or one file key sets any hook.
var hookFlagSpecs = []flagSpec{
	{name: "hook-url", env: "CHATD_HOOK_URL", help: "base URL of the application's backend: each hook of --hooks POSTs to <hook-url>/<hook> (e.g. https://backend.internal/chatd → …/chatd/publish); empty = every hook off"},
	{name: "hooks", env: "CHATD_HOOKS", list: true, help: "the hooks on, of connect, join, publish, match and rpc; empty = all five (when --hook-url or --hook-urls is set)"},
	{name: "hook-urls", env: "CHATD_HOOK_URLS", list: true, help: "per-hook URLs, hook=url (publish=https://filter.internal/hook), over --hook-url; a hook named here is on"},
	{name: "hook-secret", env: "CHATD_HOOK_SECRET", list: true, secret: true, help: "comma-separated secrets (each at least 16 characters) that sign every hook request (X-Chatd-Signature: one v1= HMAC-SHA256 per secret, for rotation); required when a hook is on"},
	{name: "hook-timeout", env: "CHATD_HOOK_TIMEOUT", list: true, help: "one attempt's timeout, for all hooks (2s) or per hook (publish=500ms); empty = 2s, publish 1s"},
	{name: "hook-retries", env: "CHATD_HOOK_RETRIES", list: true, help: "attempts made again after a failure, 0 to 5, for all or per hook (join=2); rpc is never retried; empty = 0"},
	{name: "hook-failure", env: "CHATD_HOOK_FAILURE", list: true, help: "what a hook does when the backend does not answer: closed (refuse: hook_unavailable) or open (let through), for all or per hook (publish=open); empty = closed, match open; rpc is always closed"},
	{name: "hook-scope", env: "CHATD_HOOK_SCOPE", list: true, help: "the lobbies (join, publish) or queues (match) a hook applies to, as globs separated by | (join=game-*|ranked,match=ranked); empty = all"},
	{name: "hook-breaker", env: "CHATD_HOOK_BREAKER", def: "5/10s", help: "a hook's circuit breaker: failed calls in a row that open it / how long it stays open before one call tries again"},
}

func init() { flagSpecs = append(flagSpecs, hookFlagSpecs...) }

// applyHooks fills c.Hooks from the hooks' flags.
func (r resolved) applyHooks(c *Config) error {
	v := r.val
	cfg := hooks.Config{Hooks: map[hooks.Name]hooks.HookConfig{}}
	base := strings.TrimRight(strings.TrimSpace(v["hook-url"]), "/")
	on := map[hooks.Name]bool{}
	names, err := hookNames(v["hooks"])
	if err != nil {
		return r.fail("hooks", "--hooks: %v", err)
	}
	urls, err := perHook(v["hook-urls"], false)
	if err != nil {
		return r.fail("hook-urls", "--hook-urls: %v", err)
	}
	for n, u := range urls {
		on[n] = true
		hc := cfg.Hooks[n]
		hc.URL = u
		cfg.Hooks[n] = hc
	}
	if base != "" {
		for _, n := range names {
			if !on[n] {
				hc := cfg.Hooks[n]
				hc.URL = base + "/" + string(n)
				cfg.Hooks[n] = hc
			}
		}
	}
	each := func(flag string, set func(n hooks.Name, hc *hooks.HookConfig, val string) error) error {
		m, err := perHook(v[flag], true)
		if err != nil {
			return r.fail(flag, "--%s: %v", flag, err)
		}
		// the value for every hook first, then each hook's own over it
		order := append([]hooks.Name{""}, hooks.Names...)
		for _, n := range order {
			val, ok := m[n]
			if !ok {
				continue
			}
			targets := []hooks.Name{n}
			if n == "" {
				targets = hooks.Names
			}
			for _, t := range targets {
				hc := cfg.Hooks[t]
				if err := set(t, &hc, val); err != nil {
					return r.fail(flag, "--%s: %s=%q: %v", flag, t, val, err)
				}
				if hc.URL != "" {
					cfg.Hooks[t] = hc
				}
			}
		}
		return nil
	}
	if err := each("hook-timeout", func(_ hooks.Name, hc *hooks.HookConfig, val string) error {
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 || d > time.Minute {
			return fmt.Errorf("expected a duration from 1ms to 1m")
		}
		hc.Timeout = d
		return nil
	}); err != nil {
		return err
	}
	if err := each("hook-retries", func(_ hooks.Name, hc *hooks.HookConfig, val string) error {
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > 5 {
			return fmt.Errorf("expected 0 to 5")
		}
		hc.Retries = n
		return nil
	}); err != nil {
		return err
	}
	if err := each("hook-failure", func(_ hooks.Name, hc *hooks.HookConfig, val string) error {
		if val != string(hooks.FailClosed) && val != string(hooks.FailOpen) {
			return fmt.Errorf("expected open or closed")
		}
		hc.Failure = hooks.Failure(val)
		return nil
	}); err != nil {
		return err
	}
	if err := each("hook-scope", func(_ hooks.Name, hc *hooks.HookConfig, val string) error {
		hc.Scope = nil
		for _, g := range strings.Split(val, "|") {
			if g = strings.TrimSpace(g); g != "" {
				hc.Scope = append(hc.Scope, g)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	for _, s := range strings.Split(v["hook-secret"], ",") {
		if s = strings.TrimSpace(s); s != "" {
			if len(s) < 16 {
				return r.fail("hook-secret", "--hook-secret: every secret must be at least 16 characters")
			}
			cfg.Secrets = append(cfg.Secrets, s)
		}
	}
	fails, open, ok := strings.Cut(strings.TrimSpace(v["hook-breaker"]), "/")
	n, err := strconv.Atoi(fails)
	d, derr := time.ParseDuration(open)
	if !ok || err != nil || derr != nil || n < 1 || n > 1000 || d <= 0 || d > time.Hour {
		return r.fail("hook-breaker", "--hook-breaker %q: expected failures/duration such as 5/10s", v["hook-breaker"])
	}
	cfg.BreakerFailures, cfg.BreakerOpen = n, d
	anyOn := false
	for _, hc := range cfg.Hooks {
		anyOn = anyOn || hc.URL != ""
	}
	if anyOn && len(cfg.Secrets) == 0 {
		return r.fail("hook-secret", "--hook-secret: required when a hook is on (--hook-url, --hook-urls): the backend checks every request's signature with it (CHATD_HOOK_SECRET)")
	}
	if anyOn { // no hook on: the zero Config, every hook off
		c.Hooks = cfg
	}
	return nil
}

// hookNames parses --hooks: "" = every hook.
func hookNames(list string) ([]hooks.Name, error) {
	var out []hooks.Name
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n := hooks.Name(s)
		if !knownHook(n) {
			return nil, fmt.Errorf("%q: expected connect, join, publish, match or rpc", s)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return hooks.Names, nil
	}
	return out, nil
}

// perHook parses "hook=value" entries; with bare, a value without a hook
// is for every hook (key "").
func perHook(list string, bare bool) (map[hooks.Name]string, error) {
	out := map[hooks.Name]string{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, val, ok := strings.Cut(s, "=")
		if !ok {
			if !bare {
				return nil, fmt.Errorf("%q: expected hook=value", s)
			}
			out[""] = s
			continue
		}
		n := hooks.Name(strings.TrimSpace(k))
		if !knownHook(n) {
			return nil, fmt.Errorf("%q: expected connect, join, publish, match or rpc before =", k)
		}
		out[n] = strings.TrimSpace(val)
	}
	return out, nil
}

func knownHook(n hooks.Name) bool {
	for _, k := range hooks.Names {
		if k == n {
			return true
		}
	}
	return false
}
