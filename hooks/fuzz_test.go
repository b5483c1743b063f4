package hooks

import (
	"encoding/json"
	"testing"
)

// FuzzHookReply: a backend's reply, whatever its bytes, decodes to a Reply
// or an error, never a panic, and a decoded Reply's data is valid JSON.
func FuzzHookReply(f *testing.F) {
	for _, s := range []string{`{}`, `{"deny":{"reason":"no"}}`, `{"data":{"a":1},"text":"x"}`, `{"data":null}`, `[]`, `null`,
		`{"deny":null}`, `{"text":5}`, `{"data":"` + "\xff" + `"}`, ``, `{"deny":{"reason":"` + string(make([]byte, 300)) + `"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := decodeReply(raw)
		if err != nil {
			return
		}
		if r.Data != nil && !json.Valid(r.Data) {
			t.Fatalf("data %q is not JSON", r.Data)
		}
		if r.Deny != nil {
			_ = clip(r.Deny.Reason, 200)
		}
	})
}
