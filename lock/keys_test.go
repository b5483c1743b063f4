package lock

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name      string
		prefix    string
		lockName  string
		wantLock  string
		wantFence string
	}{
		{"default prefix", "", "lobby:general", "chatd:{lobby:general}:lock", "chatd:{lobby:general}:fence"},
		{"custom prefix", "t1", "room:general-3", "t1:{room:general-3}:lock", "t1:{room:general-3}:fence"},
		{"colon in id", "x", "lb:daily@2026-11-30:x", "x:{lb:daily@2026-11-30:x}:lock", "x:{lb:daily@2026-11-30:x}:fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lk, fk := New(nil, Config{Prefix: tt.prefix}).Keys(tt.lockName)
			assert.Equal(t, tt.wantLock, lk)
			assert.Equal(t, tt.wantFence, fk)
			assert.Equal(t, keyspace.Slot(lk), keyspace.Slot(fk), "one slot")
			assert.Equal(t, tt.lockName, hashTag(lk))
		})
	}
}

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"lobby", "lobby:general", true},
		{"dots and at in id", "lb:daily@2026-11-30.x", true},
		{"colon in id", "a:b:c", true},
		{"no colon", "general", false},
		{"empty kind", ":general", false},
		{"empty id", "lobby:", false},
		{"brace in id", "lobby:a}{b", false},
		{"brace in kind", "lo{bby:a", false},
		{"dot in kind", "lo.bby:a", false},
		{"space", "lobby:a b", false},
		{"star", "lobby:*", false},
		{"long kind", "abcdefghijklmnopqrstuvwxyz0123456:a", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := checkName(tt.in)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, names.ErrBadName)
			}
		})
	}
}

func TestHashTag(t *testing.T) {
	for in, want := range map[string]string{
		"p:{lobby:a}:rooms": "lobby:a",
		"p:{}:x{y}":         "",
		"nokey":             "",
		"p:{open":           "",
		"{a}{b}":            "a",
	} {
		assert.Equal(t, want, hashTag(in), in)
	}
}
