package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chatd/chatd/realtime"
	"github.com/golang-jwt/jwt/v5"
)

// Fuzz targets of the web layer's decoders. CI runs each for 5,000 inputs
// (-fuzztime=5000x in .ci/run: a count, not a duration); for a longer run:
//
//	go test ./web/ -run='^$' -fuzz='^FuzzDecodeFrame$' -fuzztime=10m
//
// New failing inputs land in testdata/fuzz/<Target>/ and then run as
// regression cases in every plain go test.

// frameSeeds are client frames, good and bad, that start the corpus.
var frameSeeds = []string{
	`{"type":"ping"}`,
	`{"type":"join","lobby":"general"}`,
	`{"type":"say","room":"general-3","text":"hi","ref":"c-17"}`,
	`{"type":"leave","room":"general-3"}`,
	`{"type":"resume","room":"general-3","after":"1700000000000-0"}`,
	`{"type":"say","room":"general-3","text":"\u00e9\ud83d\ude00","ref":"x"}`,
	`{}`, `null`, `[]`, `"ping"`, `42`, `true`, ``, ` `,
	`{"type":5}`, `{"type":"say","text":NaN}`, `{"type":"say","text":1e999}`,
	`{"type":"ping"}{"type":"ping"}`, `{"type":"ping"} x`, `{"type":"ping"`,
	`{"type":"ping","x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`,
	`{"type":"ping","x":"` + strings.Repeat("[", 40) + `"}`,
	`{"type":"ping","x":"\"[[["}`,
	`]]]]{"type":"ping"}`,
	`{"type":"ping","ref":"` + strings.Repeat("r", 65) + `"}`,
	"{\"type\":\"say\",\"text\":\"\xff\"}",
	`{"type":"join","lobby":"a}{b"}`,
	`{"TYPE":"ping","Type":"join"}`,
	`{"type":"ping","type":"join"}`,
}

func FuzzDecodeFrame(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		fr, err := decodeFrame(p)
		if err == nil {
			if fr.Type == "" {
				t.Fatalf("decoded %q without a type", p)
			}
			if !utf8.Valid(p) {
				t.Fatalf("accepted invalid UTF-8 %q", p)
			}
			if len(fr.Ref) > 64 {
				t.Fatalf("accepted a ref of %d bytes", len(fr.Ref))
			}
			if depth, ok := jsonDepth(p); !ok || depth > maxJSONDepth {
				t.Fatalf("accepted %q: valid JSON %v, depth %d", p, ok, depth)
			}
			return
		}
		checkBadRequest(t, p, err)
	})
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"user":"alice"}`))
	f.Add([]byte(`{"player":"p","score":12.5,"mode":"best"}`))
	f.Add([]byte(nested(32)))
	f.Add([]byte(nested(33)))
	f.Fuzz(func(t *testing.T, p []byte) {
		var v map[string]any
		err := decodeJSON(p, &v)
		depth, valid := jsonDepth(p)
		if err != nil {
			checkBadRequest(t, p, err)
			if valid && depth <= maxJSONDepth && isObject(p) {
				t.Fatalf("refused a valid object of depth %d: %q: %v", depth, p, err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted invalid JSON %q", p)
		}
		if depth > maxJSONDepth {
			t.Fatalf("accepted depth %d: %q", depth, p)
		}
	})
}

func FuzzCheckDepth(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(nested(32)))
	f.Add([]byte(nested(33)))
	f.Add([]byte(`["\\", [[["\"]]]"]]]]`))
	f.Fuzz(func(t *testing.T, p []byte) {
		err := checkDepth(p)
		if err != nil {
			checkBadRequest(t, p, err)
		}
		// On valid JSON checkDepth is exact; on anything else it only
		// must not panic (the decoder refuses it after).
		if depth, ok := jsonDepth(p); ok && (err == nil) != (depth <= maxJSONDepth) {
			t.Fatalf("depth %d of %q: checkDepth said %v", depth, p, err)
		}
	})
}

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

// checkBadRequest requires err to be a documented 400 for input p.
func checkBadRequest(t *testing.T, p []byte, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%q: no error", p)
	}
	ae := toAPIError(err)
	if ae.Status != http.StatusBadRequest || (ae.Code != "bad_json" && ae.Code != "bad_request") || ae.Message == "" {
		t.Fatalf("%q: got %d %s %q", p, ae.Status, ae.Code, ae.Message)
	}
}

// jsonDepth reports whether p is exactly one valid JSON value and its
// nesting depth, computed by walking the decoded value.
func jsonDepth(p []byte) (int, bool) {
	if !json.Valid(p) {
		return 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	depth, max := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return max, true
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			if depth > max {
				max = depth
			}
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

func isObject(p []byte) bool {
	p = bytes.TrimSpace(p)
	return len(p) > 0 && p[0] == '{'
}
