package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServerAPIKeysFlag: --server-keys, its environment twin and its key
// in the config file (a YAML list) give the server API's keys; a bad key
// is refused with the flag's name, never with the secret.
func TestServerAPIKeysFlag(t *testing.T) {
	t.Parallel()
	const s1, s2 = "first-secret-0123456789abcdef", "second-secret-0123456789abcdef"
	c, err := parseConfig([]string{"--server-keys", "game:" + s1 + ":publish+grant:lobbies=mm.*,ops:" + s2 + ":*:rate=5"}, env(nil), io.Discard)
	require.NoError(t, err)
	require.Len(t, c.ServerKeys, 2)
	assert.Equal(t, "game", c.ServerKeys[0].Name)
	assert.Equal(t, []string{"grant", "publish"}, c.ServerKeys[0].Scopes)
	assert.Equal(t, []string{"mm.*"}, c.ServerKeys[0].Lobbies)
	assert.Equal(t, 5.0, c.ServerKeys[1].Rate)

	c, err = parseConfig(nil, env(map[string]string{"CHATD_SERVER_KEYS": "game:" + s1 + ":presence"}), io.Discard)
	require.NoError(t, err)
	require.Len(t, c.ServerKeys, 1)

	file := writeFile(t, "chatd.yaml", "server-keys:\n  - \"game:"+s1+":publish\"\n  - \"ops:"+s2+":disconnect\"\n")
	c, err = parseConfig([]string{"--config", file}, env(nil), io.Discard)
	require.NoError(t, err)
	require.Len(t, c.ServerKeys, 2)

	for _, bad := range []string{
		"game:" + s1 + ":fly",
		"game:" + s1 + ":publish,game:" + s2 + ":publish", // a name twice
		"game:" + s1 + ":publish,ops:" + s1 + ":publish",  // a secret twice
	} {
		_, err := parseConfig([]string{"--server-keys", bad}, env(nil), io.Discard)
		if assert.Error(t, err, bad) {
			assert.Contains(t, err.Error(), "--server-keys")
			assert.NotContains(t, err.Error(), s1)
			assert.NotContains(t, err.Error(), s2)
		}
	}
	_, err = parseConfig([]string{"--server-keys", "game:" + s1 + ":publish", "--admin-token", s1}, env(nil), io.Discard)
	require.Error(t, err, "a key's secret may not be the admin token")
	assert.NotContains(t, err.Error(), s1)
}
