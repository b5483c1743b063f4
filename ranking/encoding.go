package ranking

import (
	"fmt"
	"strconv"
)

// A board is a sorted set whose members all have score 0, so Redis orders
// them by their bytes (memcmp). Each member is
//
//	<rev:19 digits> ':' <seq:15 digits> ':' <player>
//
// rev is MaxScore - score (0..2e18 thousandths) zero-padded to 19 digits, so a
// higher score sorts first; seq is the board's post counter at the moment the
// player reached that score, zero-padded to 15 digits, so of two equal
// scores the one reached first sorts first. seq is unique within a board, so
// the player name never decides an order. lua/board_post.lua builds the same
// strings; encoding_test.go pins both to each other.
const (
	revWidth   = 19
	seqWidth   = 15
	prefixLen  = revWidth + 1 + seqWidth // rev:seq, what the player hash stores
	memberSkip = prefixLen + 1           // where the player name starts
	maxSeq     = 999_999_999_999_999     // 15 digits; the post script refuses more
)

// revOf returns the 19-digit rev part for s.
func revOf(s Score) string {
	return fmt.Sprintf("%019d", int64(MaxScore-s))
}

// scoreOfRev parses a 19-digit rev part.
func scoreOfRev(rev string) (Score, error) {
	if len(rev) != revWidth {
		return 0, fmt.Errorf("ranking: corrupt member rev %q", rev)
	}
	d, err := strconv.ParseInt(rev, 10, 64)
	if err != nil || d < 0 || d > int64(MaxScore-MinScore) {
		return 0, fmt.Errorf("ranking: corrupt member rev %q", rev)
	}
	return MaxScore - Score(d), nil
}

// decodeMember splits a board member into its player and score.
func decodeMember(m string) (player string, s Score, err error) {
	if len(m) <= memberSkip || m[revWidth] != ':' || m[prefixLen] != ':' {
		return "", 0, fmt.Errorf("ranking: corrupt member %q", clip(m))
	}
	s, err = scoreOfRev(m[:revWidth])
	return m[memberSkip:], s, err
}

// splitScore returns hi, lo with s = hi*1e9 + lo and 0 ≤ lo < 1e9: the form
// the post script does its arithmetic in, since Lua numbers are doubles and
// hold integers exactly only up to 2^53 (9e15), not 1e18.
func splitScore(s Score) (hi, lo int64) {
	v := int64(s)
	hi, lo = v/1e9, v%1e9
	if lo < 0 {
		hi, lo = hi-1, lo+1e9
	}
	return hi, lo
}
