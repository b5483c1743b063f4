package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chatd/chatd/errcode"
)

// Fuzz targets of the frame decoders. CI runs each for 5,000 inputs
// (-fuzztime=5000x in .ci/run: a count, not a duration); for a longer run:
//
//	go test ./protocol/ -run='^$' -fuzz='^FuzzDecode$' -fuzztime=10m
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
	`{"type":"queue","queue":"quick","skill":1500,"party":["bob"],"attributes":{"region":"eu"}}`,
	`{"type":"queue","queue":"quick","skill":"high"}`,
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

func nested(depth int) string {
	return `{"x":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

func FuzzDecode(f *testing.F) {
	for _, s := range frameSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		var fast, slow Frame
		fastErr, slowErr := decodeFrame(p, &fast), DecodeJSON(p, &slow)
		if !reflect.DeepEqual(fast, slow) || fmt.Sprint(fastErr) != fmt.Sprint(slowErr) {
			t.Fatalf("%q: decodeFrame read %+v (%v), DecodeJSON %+v (%v)", p, fast, fastErr, slow, slowErr)
		}
		fr, err := Decode(p)
		if err == nil {
			if fr.Type == "" {
				t.Fatalf("decoded %q without a type", p)
			}
			if !utf8.Valid(p) {
				t.Fatalf("accepted invalid UTF-8 %q", p)
			}
			if len(fr.Ref) > MaxRef {
				t.Fatalf("accepted a ref of %d bytes", len(fr.Ref))
			}
			if depth, ok := jsonDepth(p); !ok || depth > MaxJSONDepth {
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
		err := DecodeJSON(p, &v)
		depth, valid := jsonDepth(p)
		if err != nil {
			checkBadRequest(t, p, err)
			if valid && depth <= MaxJSONDepth && isObject(p) {
				t.Fatalf("refused a valid object of depth %d: %q: %v", depth, p, err)
			}
			return
		}
		if !valid {
			t.Fatalf("accepted invalid JSON %q", p)
		}
		if depth > MaxJSONDepth {
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
		err := CheckDepth(p)
		if err != nil {
			checkBadRequest(t, p, err)
		}
		// On valid JSON CheckDepth is exact; on anything else it only
		// must not panic (the decoder refuses it after).
		if depth, ok := jsonDepth(p); ok && (err == nil) != (depth <= MaxJSONDepth) {
			t.Fatalf("depth %d of %q: CheckDepth said %v", depth, p, err)
		}
	})
}

// FuzzDecodeEvent: a client's decoder never panics, and an event it
// accepts encodes again.
func FuzzDecodeEvent(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","user":"alice","node":"n1","motd":""}`,
		`{"type":"joined","room":{"id":"g-1","lobby":"g","seq":1,"capacity":5,"members":["alice"]}}`,
		`{"type":"joined","room":"g-1"}`,
		`{"type":"message","message":{"id":"1-0","room":"g-1","from":"a","text":"hi","ts":"2026-01-02T03:04:05.000Z"}}`,
		`{"type":"message","message":null}`,
		`{"type":"ack","ref":"r","id":"1-0","room":"g-1"}`,
		`{"type":"error","code":"bad_json","message":"x","room":5}`,
		`{"type":"settings","key":"motd","value":"hi","version":3}`,
		`{"type":"queued","ticket":{"id":"t","queue":"q","user":"u","skill":1,"created":1,"state":"waiting"}}`,
		`{"type":"future"}`, `{}`, `[]`, `null`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		ev, err := DecodeEvent(p)
		if err != nil {
			return
		}
		if _, err := Encode(ev); err != nil {
			t.Fatalf("%q decoded as %#v, which does not encode: %v", p, ev, err)
		}
	})
}

// checkBadRequest requires err to be a documented bad_json or bad_request
// with a sentence for the client.
func checkBadRequest(t *testing.T, p []byte, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%q: no error", p)
	}
	if c := errcode.Of(err); (c != errcode.BadJSON && c != errcode.BadRequest) || errcode.Message(err) == "" {
		t.Fatalf("%q: got %s %q", p, c, errcode.Message(err))
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

// BenchmarkDecode is a node's decode of a say frame, the frame every
// sender sends: its allocations are paid per say on the reader.
func BenchmarkDecode(b *testing.B) {
	p := []byte(`{"type":"say","room":"general-3","text":"fb 1 17 204 1764504000123456789 xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","ref":"p1-204-1764504000123456789"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(p); err != nil {
			b.Fatal(err)
		}
	}
}
