package main

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/hooks"
)

const hookSecretValue = "hook-secret-from-env-0123"

func TestHookFlags(t *testing.T) {
	t.Parallel()
	t.Run("off by default", func(t *testing.T) {
		c, err := parseConfig(nil, env(nil), io.Discard)
		require.NoError(t, err)
		assert.Equal(t, hooks.Config{}, c.Hooks)
	})
	t.Run("a base URL turns every hook on, the lists set each", func(t *testing.T) {
		c, err := parseConfig([]string{"--hook-url", "http://backend.internal/chatd/", "--hook-urls", "publish=https://filter.internal/hook",
			"--hook-timeout", "800ms,publish=300ms", "--hook-retries", "join=2", "--hook-failure", "publish=open",
			"--hook-scope", "join=vip-*|ranked,match=duel", "--hook-breaker", "3/30s"},
			env(map[string]string{"CHATD_HOOK_SECRET": hookSecretValue + ",second-secret-0123456789"}), io.Discard)
		require.NoError(t, err)
		h := c.Hooks
		assert.Equal(t, []string{hookSecretValue, "second-secret-0123456789"}, h.Secrets)
		assert.Equal(t, 3, h.BreakerFailures)
		assert.Equal(t, 30*time.Second, h.BreakerOpen)
		assert.Equal(t, hooks.HookConfig{URL: "http://backend.internal/chatd/connect", Timeout: 800 * time.Millisecond}, h.Hooks[hooks.Connect])
		assert.Equal(t, hooks.HookConfig{URL: "http://backend.internal/chatd/join", Timeout: 800 * time.Millisecond, Retries: 2, Scope: []string{"vip-*", "ranked"}}, h.Hooks[hooks.Join])
		assert.Equal(t, hooks.HookConfig{URL: "https://filter.internal/hook", Timeout: 300 * time.Millisecond, Failure: hooks.FailOpen}, h.Hooks[hooks.Publish])
		assert.Equal(t, []string{"duel"}, h.Hooks[hooks.Match].Scope)
		assert.Equal(t, "http://backend.internal/chatd/rpc", h.Hooks[hooks.RPC].URL)
	})
	t.Run("--hooks picks some", func(t *testing.T) {
		c, err := parseConfig([]string{"--hook-url", "http://b", "--hooks", "join,rpc", "--hook-secret", hookSecretValue}, env(nil), io.Discard)
		require.NoError(t, err)
		assert.Len(t, c.Hooks.Hooks, 2)
		assert.Empty(t, c.Hooks.Hooks[hooks.Publish].URL)
	})
	for name, args := range map[string][]string{
		"no secret":      {"--hook-url", "http://b"},
		"short secret":   {"--hook-url", "http://b", "--hook-secret", "short"},
		"unknown hook":   {"--hook-url", "http://b", "--hook-secret", hookSecretValue, "--hooks", "refresh"},
		"bad timeout":    {"--hook-url", "http://b", "--hook-secret", hookSecretValue, "--hook-timeout", "publish=soon"},
		"bad retries":    {"--hook-url", "http://b", "--hook-secret", hookSecretValue, "--hook-retries", "9"},
		"bad failure":    {"--hook-url", "http://b", "--hook-secret", hookSecretValue, "--hook-failure", "join=maybe"},
		"bad breaker":    {"--hook-url", "http://b", "--hook-secret", hookSecretValue, "--hook-breaker", "5"},
		"bare hook-urls": {"--hook-urls", "http://b", "--hook-secret", hookSecretValue},
	} {
		t.Run("refuses "+name, func(t *testing.T) {
			_, err := parseConfig(args, env(nil), io.Discard)
			assert.Error(t, err)
		})
	}
	t.Run("the secret is masked by --print-config", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		require.NoError(t, run(t.Context(), []string{"--print-config", "--hook-url", "http://b"},
			env(map[string]string{"CHATD_HOOK_SECRET": hookSecretValue}), &stdout, &stderr))
		assert.NotContains(t, stdout.String(), hookSecretValue)
		assert.Contains(t, stdout.String(), `hook-url: "http://b"`)
	})
}
