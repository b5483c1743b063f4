package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJWTClaimsAreConfigured: --jwt-audience and --jwt-issuer are flags,
// environment variables and config-file keys (they were none: "flag
// provided but not defined", the file key refused as unknown), shown by
// --print-config, and a bad value is refused naming the flag.
func TestJWTClaimsAreConfigured(t *testing.T) {
	t.Parallel()
	c, err := parseConfig([]string{"--jwt-audience", "chatd-prod", "--jwt-issuer", "login.example"}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "chatd-prod", c.JWTAudience)
	assert.Equal(t, "login.example", c.JWTIssuer)

	c, err = parseConfig(nil, env(map[string]string{"CHATD_JWT_AUDIENCE": "env-aud", "CHATD_JWT_ISSUER": "env-iss"}), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "env-aud", c.JWTAudience)
	assert.Equal(t, "env-iss", c.JWTIssuer)

	file := writeFile(t, "jwt.yaml", "jwt-audience: file-aud\njwt-issuer: file-iss\n")
	c, r, err := loadConfig([]string{"--config", file}, env(nil), io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "file-aud", c.JWTAudience)
	assert.Equal(t, "file-iss", c.JWTIssuer)
	assert.Equal(t, "file", r.from["jwt-audience"].kind)

	var out strings.Builder
	require.NoError(t, run(t.Context(), []string{"--config", file, "--print-config"}, env(nil), &out, io.Discard))
	assert.Contains(t, out.String(), `jwt-audience: "file-aud" # `+file+":1")
	assert.Contains(t, out.String(), `jwt-issuer: "file-iss" # `+file+":2")

	for _, bad := range [][]string{{"--jwt-audience", "two words"}, {"--jwt-issuer", strings.Repeat("x", 257)}} {
		_, err := parseConfig(bad, env(nil), io.Discard)
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), bad[0])
	}
}

// TestRunRefusesTokensOfAnotherAudienceOrIssuer: a node started with
// --jwt-audience and --jwt-issuer answers 401 to a token signed with the
// shared secret but minted for another service (aud "billing-service") or
// by another issuer, and 200 to one with both claims right.
func TestRunRefusesTokensOfAnotherAudienceOrIssuer(t *testing.T) {
	base, _, stop := started(t, []string{"--addr", "127.0.0.1:0", "--secret", secret, "--auth", "jwt",
		"--jwt-audience", "chatd-prod", "--jwt-issuer", "login.example"}, nil)
	mint := func(aud, iss string) string {
		now := time.Now()
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": "alice", "sid": "s1", "iss": iss, "aud": aud, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		}).SignedString([]byte(secret))
		require.NoError(t, err)
		return tok
	}
	assert.Equal(t, 401, get(t, base+"/api/v1/stats", mint("billing-service", "login.example"), "GET", ""), "another audience")
	assert.Equal(t, 401, get(t, base+"/api/v1/stats", mint("chatd-prod", "chatd"), "GET", ""), "another issuer")
	assert.Equal(t, 200, get(t, base+"/api/v1/stats", mint("chatd-prod", "login.example"), "GET", ""), "both right")
	require.NoError(t, stop())
}
