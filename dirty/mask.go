package dirty

import (
	"math/bits"
	"strings"
)

// Section is one part of a poll answer that can be dirty. Its value is the
// bit offset in the session's Redis bitmap ([SETBIT] offset), so the table
// below is also the wire layout: append new sections, never renumber.
//
//	bit  section       dirty when
//	0    rooms         membership of one of the session's rooms changed
//	1    messages      a new message in one of the session's rooms
//	2    leaderboards  a board the user posted to changed
//	3    settings      a setting changed
//	4    wallet        the user's wallet changed
//	5    notices       an admin notice was posted
//	6    match         one of the user's matchmaking tickets was matched or expired
//
// [SETBIT]: https://redis.io/commands/setbit/
type Section int

// The sections, in bit order.
const (
	Rooms Section = iota
	Messages
	Leaderboards
	Settings
	Wallet
	Notices
	Match
	Direct

	numSections // keep last
)

var sectionNames = [numSections]string{"rooms", "messages", "leaderboards", "settings", "wallet", "notices", "match", "direct"}

// SectionName returns the protocol name of s ("rooms", "messages", …), or ""
// for a section this version does not know.
func SectionName(s Section) string {
	if s < 0 || s >= numSections {
		return ""
	}
	return sectionNames[s]
}

// SectionByName returns the section named name, and false for an unknown name.
func SectionByName(name string) (Section, bool) {
	for i, n := range sectionNames {
		if n == name {
			return Section(i), true
		}
	}
	return 0, false
}

// Mask is a set of sections: bit s is set when section s is dirty.
type Mask uint64

// AllSections has every known section set: a new session starts with it.
const AllSections Mask = 1<<numSections - 1

// Of returns the mask of the given sections.
func Of(sections ...Section) Mask {
	var m Mask
	for _, s := range sections {
		if s >= 0 && s < 64 {
			m |= 1 << s
		}
	}
	return m
}

// Has reports whether s is set in m.
func (m Mask) Has(s Section) bool { return s >= 0 && s < 64 && m&(1<<s) != 0 }

// Sections returns the names of the known sections set in m, in bit order;
// never nil, so that it encodes as a JSON array.
func (m Mask) Sections() []string {
	out := make([]string, 0, bits.OnesCount64(uint64(m&AllSections)))
	for s := Section(0); s < numSections; s++ {
		if m.Has(s) {
			out = append(out, sectionNames[s])
		}
	}
	return out
}

// String returns the section names joined by "|", or "clean".
func (m Mask) String() string {
	if m == 0 {
		return "clean"
	}
	return strings.Join(m.Sections(), "|")
}

// offsets returns the bit offsets set in m, as Lua ARGV.
func (m Mask) offsets() []any {
	out := make([]any, 0, bits.OnesCount64(uint64(m)))
	for s := 0; s < 64; s++ {
		if m&(1<<s) != 0 {
			out = append(out, s)
		}
	}
	return out
}

// parseBitmap reads a Redis bitmap: SETBIT offset i is bit 7-i%8 of byte i/8
// (the most significant bit first). Offsets from 64 on are ignored.
func parseBitmap(b string) Mask {
	var m Mask
	for i := 0; i < len(b) && i < 8; i++ {
		c := b[i]
		for j := 0; j < 8; j++ {
			if c&(0x80>>j) != 0 {
				m |= 1 << (i*8 + j)
			}
		}
	}
	return m
}
