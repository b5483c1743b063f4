// Package names validates the names clients send before any of them becomes
// part of a Redis key or channel.
//
// A name is checked against a closed character set, never escaped: a user
// called "a}{b" or "*" could otherwise move a key into another hash slot or
// turn a SCAN/PSUBSCRIBE pattern into a wildcard.
package names

import (
	"github.com/chatd/chatd/errcode"

	"fmt"
)

// ErrBadName is returned, wrapped with the kind of name and the reason, for
// every name that is not valid.
var ErrBadName = errcode.New(errcode.BadName, "bad name")

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
