package dirty

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSectionTable(t *testing.T) {
	tests := []struct {
		s    Section
		name string
		bit  Mask
	}{
		{Rooms, "rooms", 1},
		{Messages, "messages", 2},
		{Leaderboards, "leaderboards", 4},
		{Settings, "settings", 8},
		{Wallet, "wallet", 16},
		{Notices, "notices", 32},
		{Match, "match", 64},
	}
	for _, tt := range tests {
		t.Run(tt.name+" has its documented bit and name", func(t *testing.T) {
			assert.Equal(t, tt.name, SectionName(tt.s))
			assert.Equal(t, tt.bit, Of(tt.s))
			got, ok := SectionByName(tt.name)
			assert.True(t, ok)
			assert.Equal(t, tt.s, got)
		})
	}
	t.Run("unknown sections have no name", func(t *testing.T) {
		assert.Equal(t, "", SectionName(Section(40)))
		assert.Equal(t, "", SectionName(-1))
		_, ok := SectionByName("nope")
		assert.False(t, ok)
	})
}

func TestMask(t *testing.T) {
	t.Run("sections are listed in bit order", func(t *testing.T) {
		m := Of(Notices, Rooms, Wallet)
		assert.True(t, m.Has(Rooms))
		assert.False(t, m.Has(Messages))
		assert.Equal(t, []string{"rooms", "wallet", "notices"}, m.Sections())
		assert.Equal(t, "rooms|wallet|notices", m.String())
	})
	t.Run("a clean mask lists an empty array", func(t *testing.T) {
		b, err := json.Marshal(Mask(0).Sections())
		assert.NoError(t, err)
		assert.Equal(t, "[]", string(b))
		assert.Equal(t, "clean", Mask(0).String())
	})
	t.Run("all sections holds exactly the eight known", func(t *testing.T) {
		assert.Len(t, AllSections.Sections(), 8)
		assert.Equal(t, Mask(255), AllSections)
	})
	t.Run("unknown bits are kept but not named", func(t *testing.T) {
		m := Of(Rooms, Section(9))
		assert.True(t, m.Has(Section(9)))
		assert.Equal(t, []string{"rooms"}, m.Sections())
	})
}

func TestParseBitmap(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Mask
	}{
		{"missing key is clean", "", 0},
		{"offset 0 is the top bit of byte 0", "\x80", Of(Rooms)},
		{"offset 5 is notices", "\x04", Of(Notices)},
		{"all eight sections", "\xff", AllSections},
		{"offset 9 is in the second byte", "\x00\x40", Of(Section(9))},
		{"offsets past 63 are ignored", "\x80\x00\x00\x00\x00\x00\x00\x00\xff", Of(Rooms)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseBitmap(tt.in))
		})
	}
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"s1", "eyJhbGciOi.JIUzI1NiJ9-_x", "a:b/c+d="} {
		assert.NoError(t, checkID("session", ok), ok)
	}
	for _, bad := range []string{"", "a b", "a{b", "b}", "tab\t", "é", string(make([]byte, 257))} {
		assert.ErrorIs(t, checkID("session", bad), ErrBadID, "%q", bad)
	}
}
