// Package names validates the names clients send before any of them becomes
// part of a Redis key or channel.
//
// A name is checked against a closed character set, never escaped: a user
// called "a}{b" or "*" could otherwise move a key into another hash slot or
// turn a SCAN/PSUBSCRIBE pattern into a wildcard.
//
// # One person, one name: Canonical
//
// User and player names are compared in one canonical form (Canonical):
// "Misc1", "MISC1" and "misc1" are one guest, one leaderboard player, one
// muted or banned user. Left case-sensitive, a second guest takes "MISC1"
// beside "Misc1" and passes for them in every room (impersonation: both
// display alike to a reader who does not compare letter by letter), and a
// banned "bob" comes back as "Bob" (ban evasion). The name as the guest
// typed it is kept for display; every key, claim, ban and board entry is
// made of the canonical form.
//
// The canonical form is Unicode simple case folding (the folding of
// CaseFolding.txt's C and S lines, what strings.EqualFold compares with),
// which on the alphabet of these names — ASCII [A-Za-z0-9_-] — is exactly
// ASCII lowercasing: no other character of the alphabet has a case, and no
// character outside ASCII can get in (User refuses it). Were the alphabet
// ever widened past ASCII, Canonical would have to fold for real (and
// normalise, NFKC, so that look-alike code points meet too); lowercasing
// alone would then let "K" (U+212A KELVIN SIGN) and "K" be two names.
package names

import (
	"fmt"

	"github.com/chatd/chatd/errcode"
)

// ErrBadName is returned, wrapped with the kind of name and the reason, for
// every name that is not valid. Its code is errcode.BadName; the client
// sees the reason ("user name is empty").
var ErrBadName = errcode.New(errcode.BadName, "bad name")

// Canonical returns the one canonical form of a user or player name: the
// form under which it is claimed, ranked, muted and banned, so that names
// differing only in case are one name (see the package doc). For the
// alphabet of valid names, [A-Za-z0-9_-], it is ASCII lowercasing (which
// there equals Unicode simple case folding). It does not validate: check
// the name with User or Player first; bytes outside ASCII letters are kept
// as they are. A name that is already canonical is returned without
// copying.
func Canonical(name string) string {
	i := 0
	for i < len(name) && !(name[i] >= 'A' && name[i] <= 'Z') {
		i++
	}
	if i == len(name) {
		return name
	}
	b := []byte(name)
	for ; i < len(b); i++ {
		if c := b[i]; c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// Limits of the documented name kinds.
const (
	MaxUser = 32 // user names: 1–32 of [A-Za-z0-9_-]
	MaxName = 64 // lobby, board and item names: 1–64 of [A-Za-z0-9_.-]
)

// User checks a user name: 1–32 of [A-Za-z0-9_-].
func User(s string) error { return check("user", s, MaxUser, false) }

// Lobby checks a lobby name: 1–64 of [A-Za-z0-9_.-].
func Lobby(s string) error { return check("lobby", s, MaxName, true) }

// Board checks a leaderboard name: 1–64 of [A-Za-z0-9_.-], optionally
// followed by "@daily" or "@weekly" (not counted in the 64).
func Board(s string) error {
	base := s
	for _, suffix := range []string{"@daily", "@weekly"} {
		if len(s) > len(suffix) && s[len(s)-len(suffix):] == suffix {
			base = s[:len(s)-len(suffix)]
			break
		}
	}
	return check("board", base, MaxName, true)
}

// Item checks a shop item name: 1–64 of [A-Za-z0-9_.-].
func Item(s string) error { return check("item", s, MaxName, true) }

// Player checks a leaderboard player name, which follows the user name rule.
func Player(s string) error { return check("player", s, MaxUser, false) }

// Room checks a room id "{lobby}-{seq}": a lobby name, a dash, and a
// positive decimal number without leading zeros.
func Room(s string) error {
	i := len(s) - 1
	for i >= 0 && s[i] >= '0' && s[i] <= '9' {
		i--
	}
	if i <= 0 || i == len(s)-1 || s[i] != '-' || s[i+1] == '0' || len(s)-i-1 > 12 {
		return fmt.Errorf("%w: room %q must be a lobby name, '-' and a room number", ErrBadName, clip(s))
	}
	if err := check("room", s[:i], MaxName, true); err != nil {
		return err
	}
	return nil
}

func check(kind, s string, max int, dot bool) error {
	if s == "" {
		return fmt.Errorf("%w: %s name is empty", ErrBadName, kind)
	}
	if len(s) > max {
		return fmt.Errorf("%w: %s name is longer than %d characters", ErrBadName, kind, max)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '.' && dot:
		default:
			allowed := "A-Z a-z 0-9 _ -"
			if dot {
				allowed += " ."
			}
			return fmt.Errorf("%w: %s name %q may only hold %s", ErrBadName, kind, clip(s), allowed)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
