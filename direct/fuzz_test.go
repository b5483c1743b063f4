package direct_test

import (
	"testing"

	"github.com/chatd/chatd/direct"
)

// FuzzDirectEnvelope: a payload of the direct channel never panics the
// decoder, and what it accepts names at least one user and keeps the
// frame's bytes.
func FuzzDirectEnvelope(f *testing.F) {
	f.Add([]byte("bob alice\n{\"type\":\"dm\"}"))
	f.Add([]byte("\n{}"))
	f.Add([]byte("no newline"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, p []byte) {
		users, frame, ok := direct.DecodeEnvelope(p)
		if !ok {
			return
		}
		if len(users) == 0 && len(frame) == len(p) {
			t.Fatalf("accepted %q without a user line", p)
		}
		if len(frame) > len(p) {
			t.Fatalf("frame longer than the payload")
		}
	})
}

// FuzzDirectNormalizeID: any string is a padded id or ErrBadID, never a
// panic, and a padded id normalizes to itself.
func FuzzDirectNormalizeID(f *testing.F) {
	f.Add("1-1")
	f.Add("0001796114764962-000001")
	f.Add("-")
	f.Add("18446744073709551616-1")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := direct.NormalizeID(s)
		if err != nil {
			return
		}
		again, err := direct.NormalizeID(id)
		if err != nil || again != id {
			t.Fatalf("%q → %q → %q, %v", s, id, again, err)
		}
	})
}
