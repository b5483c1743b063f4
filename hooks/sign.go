package hooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Signature is the X-Chatd-Signature header of a request: for each
// secret, "v1=" and the hex HMAC-SHA256 of timestamp + "." + body, the
// signatures separated by commas. A backend accepts the request when one
// of them matches one of its secrets (so a secret can be rotated) and the
// timestamp is within ReplayWindow of its clock.
func Signature(secrets []string, timestamp string, body []byte) string {
	parts := make([]string, 0, len(secrets))
	for _, s := range secrets {
		parts = append(parts, "v1="+sign(s, timestamp, body))
	}
	return strings.Join(parts, ",")
}

func sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}
