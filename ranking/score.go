package ranking

import (
	"fmt"
	"math"
	"strconv"
)

// Score is a leaderboard score held exactly, as an integer count of
// thousandths: Score(12500) is 12.5. Its domain is -1e15..1e15 with at most
// three decimals (MinScore..MaxScore); ParseScore and FloatScore refuse
// everything else with ErrBadScore.
//
// A Score reads and writes itself in JSON as a plain number (12.5, -0.001,
// 1000000000000000), exactly: no float64 rounding happens on the way in or
// out, so 999999999999999.999 survives a round trip through chatd.
type Score int64

// The score domain: ±1e15 with three decimals, i.e. ±1e18 thousandths.
const (
	MaxScore Score = 1_000_000_000_000_000_000  // 1e15
	MinScore Score = -1_000_000_000_000_000_000 // -1e15
)

// maxExp caps the exponent read by ParseScore; beyond it every non-zero
// number is out of the domain (or has too many decimals) anyway.
const maxExp = 1 << 20

// ParseScore parses the text of a JSON number ("12.5", "-3", "1.5e3") into an
// exact Score. It returns an error wrapping ErrBadScore for text that is not a
// JSON number (NaN, Infinity, "+1", " 1", "0x10", "1.", a quoted string, null),
// for more than three decimals after the exponent is applied ("0.0001",
// "1e-4"; "1.2300" is fine), and for a magnitude above 1e15.
func ParseScore(text string) (Score, error) {
	bad := func(why string) (Score, error) {
		return 0, fmt.Errorf("%w: %q %s", ErrBadScore, clip(text), why)
	}
	s := text
	neg := false
	if s != "" && s[0] == '-' {
		neg, s = true, s[1:]
	}
	// Integer part: "0" or [1-9][0-9]*.
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	if i == 0 {
		return bad("is not a number")
	}
	if s[0] == '0' && i > 1 {
		return bad("is not a number (leading zero)")
	}
	intPart := s[:i]
	s = s[i:]
	frac := ""
	if s != "" && s[0] == '.' {
		j := 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == 1 {
			return bad("is not a number (no digit after the point)")
		}
		frac, s = s[1:j], s[j:]
	}
	exp := 0
	if s != "" && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		expNeg := false
		if s != "" && (s[0] == '+' || s[0] == '-') {
			expNeg, s = s[0] == '-', s[1:]
		}
		j := 0
		for j < len(s) && isDigit(s[j]) {
			if exp < maxExp {
				exp = exp*10 + int(s[j]-'0')
			}
			j++
		}
		if j == 0 {
			return bad("is not a number (no digit in the exponent)")
		}
		if expNeg {
			exp = -exp
		}
		s = s[j:]
	}
	if s != "" {
		return bad("is not a number")
	}

	// The value is digits × 10^scale thousandths.
	digits := intPart + frac
	scale := exp - len(frac) + 3
	for len(digits) > 0 && digits[0] == '0' {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, nil // any spelling of zero, "-0" and "0e999" included
	}
	for digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		scale++
	}
	if scale < 0 {
		return bad("has more than 3 decimals")
	}
	if len(digits)+scale > 19 {
		return bad("is out of range (at most ±1e15)")
	}
	var v uint64
	for k := 0; k < len(digits); k++ {
		v = v*10 + uint64(digits[k]-'0')
	}
	for ; scale > 0; scale-- {
		v *= 10 // at most 19 digits: below 2^64
	}
	if v > uint64(MaxScore) {
		return bad("is out of range (at most ±1e15)")
	}
	if neg {
		return -Score(v), nil
	}
	return Score(v), nil
}

// FloatScore converts f to a Score through its shortest decimal spelling
// (the one strconv and encoding/json print), so FloatScore(12.345) is exactly
// 12.345. It returns an error wrapping ErrBadScore for NaN, ±Inf, more than
// three decimals and magnitudes above 1e15.
func FloatScore(f float64) (Score, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%w: %v is not a finite number", ErrBadScore, f)
	}
	return ParseScore(strconv.FormatFloat(f, 'g', -1, 64))
}

// String returns the score as a decimal number with no trailing zeros:
// "12.5", "-0.001", "7".
func (s Score) String() string {
	b, _ := s.AppendText(nil) // never fails
	return string(b)
}

// AppendText appends the decimal spelling of String to b.
func (s Score) AppendText(b []byte) ([]byte, error) {
	v := int64(s)
	if v < 0 {
		b = append(b, '-')
		v = -v // |v| ≤ 1e18 for every valid score; int64 holds 9.2e18
	}
	b = strconv.AppendInt(b, v/1000, 10)
	if f := v % 1000; f != 0 {
		d := [4]byte{'.', byte('0' + f/100), byte('0' + f/10%10), byte('0' + f%10)}
		n := 4
		for d[n-1] == '0' {
			n--
		}
		b = append(b, d[:n]...)
	}
	return b, nil
}

// Float64 returns the float64 nearest to the score.
func (s Score) Float64() float64 {
	f, _ := strconv.ParseFloat(s.String(), 64) // a valid decimal: cannot fail
	return f
}

// MarshalJSON writes the score as a JSON number, exactly.
func (s Score) MarshalJSON() ([]byte, error) {
	return s.AppendText(nil)
}

// UnmarshalJSON reads a JSON number with ParseScore. A string, null, or any
// other JSON value is an error wrapping ErrBadScore.
func (s *Score) UnmarshalJSON(b []byte) error {
	v, err := ParseScore(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

func (s Score) valid() bool { return s >= MinScore && s <= MaxScore }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
