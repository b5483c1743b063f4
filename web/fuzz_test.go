package web

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chatd/chatd/realtime"
)

// Fuzz targets of the web layer's decoders (the frame and JSON decoders'
// are in protocol). CI runs each for 5,000 inputs (-fuzztime=5000x in
// .ci/run: a count, not a duration); for a longer run:
//
//	go test ./web/ -run='^$' -fuzz='^FuzzVerifyToken$' -fuzztime=10m
//
// New failing inputs land in testdata/fuzz/<Target>/ and then run as
// regression cases in every plain go test.

func FuzzVerifyToken(f *testing.F) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tk := &tokens{secret: []byte(testSecret), ttl: time.Hour, now: func() time.Time { return now }}
	// a fixed token: the fuzz workers must agree on it
	good := mintWith(f, jwt.SigningMethodHS256, []byte(testSecret), goodClaims(now))
	sess := realtime.Principal{User: "alice", Session: "s0123456789abcdef", Expires: now.Add(time.Hour)}
	f.Add(good)
	for _, raw := range badTokens(f, []byte(testSecret), now) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := tk.verify(raw)
		if err != nil {
			if !errors.Is(err, errBadToken) {
				t.Fatalf("verify(%q): %v does not wrap errBadToken", raw, err)
			}
			return
		}
		// Without the secret no input may verify as anything but the one
		// token the test minted.
		if got != sess {
			t.Fatalf("verify(%q) = %+v, want the minted %+v or an error", raw, got, sess)
		}
	})
}
