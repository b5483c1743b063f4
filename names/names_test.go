package names

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/chatd/chatd/errcode"
)

func TestNames(t *testing.T) {
	tests := []struct {
		name  string
		check func(string) error
		in    string
		ok    bool
	}{
		{"user plain", User, "alice", true},
		{"user dash underscore", User, "a_b-C9", true},
		{"user 32", User, strings.Repeat("a", 32), true},
		{"user 33", User, strings.Repeat("a", 33), false},
		{"user empty", User, "", false},
		{"user dot", User, "a.b", false},
		{"user brace", User, "a}{b", false},
		{"user star", User, "*", false},
		{"user colon", User, "a:b", false},
		{"user unicode", User, "jürgen", false},
		{"user space", User, "a b", false},
		{"lobby dot", Lobby, "eu.general", true},
		{"lobby 64", Lobby, strings.Repeat("x", 64), true},
		{"lobby 65", Lobby, strings.Repeat("x", 65), false},
		{"lobby newline", Lobby, "a\nb", false},
		{"board daily", Board, "clicks@daily", true},
		{"board weekly", Board, "clicks@weekly", true},
		{"board monthly", Board, "clicks@monthly", false},
		{"board only suffix", Board, "@daily", false},
		{"board at", Board, "a@b", false},
		{"item", Item, "sword.v2", true},
		{"room", Room, "general-3", true},
		{"room dashed lobby", Room, "eu-west-12", true},
		{"room zero", Room, "general-0", false},
		{"room leading zero", Room, "general-03", false},
		{"room no number", Room, "general-", false},
		{"room no lobby", Room, "-3", false},
		{"room bad lobby", Room, "ge{n}-3", false},
		{"room huge number", Room, "g-1234567890123", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check(tt.in)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrBadName)
			}
		})
	}
}

// The oracle: the documented rules (names.go's doc comments) written as
// regular expressions, independently of check's byte loop. Room numbers are
// at most 12 digits (Room's own limit, so a room id stays far below 2^53).
var oracle = []struct {
	kind  string
	check func(string) error
	re    *regexp.Regexp
}{
	{"user", User, regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)},
	{"player", Player, regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)},
	{"lobby", Lobby, regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)},
	{"item", Item, regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)},
	{"board", Board, regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}(@daily|@weekly)?$`)},
	{"room", Room, regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}-[1-9][0-9]{0,11}$`)},
}

// checkOracle fails t unless every checker accepts s exactly when its
// documented rule matches, and refuses with ErrBadName otherwise.
func checkOracle(t *testing.T, s string) {
	t.Helper()
	for _, o := range oracle {
		err := o.check(s)
		want := o.re.MatchString(s)
		switch {
		case want && err != nil:
			t.Errorf("%s %q: refused (%v), the documented rule accepts it", o.kind, s, err)
		case !want && err == nil:
			t.Errorf("%s %q: accepted, the documented rule refuses it", o.kind, s)
		case err != nil && !errors.Is(err, ErrBadName):
			t.Errorf("%s %q: error %v does not wrap ErrBadName", o.kind, s, err)
		case err != nil && utf8.ValidString(s) && !utf8.ValidString(err.Error()):
			t.Errorf("%s %q: message is not valid UTF-8", o.kind, s)
		}
	}
}

// TestEveryByte puts each of the 256 byte values alone, inside a name, at
// either end and in a room number, so a checker that lets one byte outside
// the alphabet through (or refuses one inside it) fails here without fuzzing.
func TestEveryByte(t *testing.T) {
	for b := 0; b < 256; b++ {
		c := string([]byte{byte(b)})
		for _, s := range []string{c, "a" + c + "b", c + "ab", "ab" + c, "lobby" + c + "-3", "lobby-" + c, "lobby-1" + c, "b" + c + "@daily"} {
			checkOracle(t, s)
		}
	}
	// Lengths around each limit, with and without the suffixes.
	for n := 0; n <= 66; n++ {
		x := strings.Repeat("x", n)
		for _, s := range []string{x, x + "@daily", x + "@weekly", x + "-1", x + "-" + strings.Repeat("9", 12), x + "-" + strings.Repeat("9", 13)} {
			checkOracle(t, s)
		}
	}
}

// FuzzNames checks every name checker against the oracle on arbitrary
// strings (CI: 5,000 generated inputs; see README.md to fuzz for longer).
func FuzzNames(f *testing.F) {
	for _, s := range []string{"alice", "general-3", "a}{b", "clicks@daily", "x@weekly@daily", "", "\x00", "é", "a/b", "a.b", "eu-west-12", "g-0", "g-01", "@daily",
		strings.Repeat("a", 32), strings.Repeat("a", 33), strings.Repeat("a", 64), strings.Repeat("a", 65)} {
		f.Add(s)
	}
	f.Fuzz(checkOracle)
}

func TestCanonical(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"misc1", "misc1"},
		{"Misc1", "misc1"},
		{"MISC1", "misc1"},
		{"a_B-C9", "a_b-c9"},
		{"ZZ", "zz"},
		{"@[`{", "@[`{"}, // the bytes beside A-Z and a-z are not letters
		{"", ""},
	} {
		assert.Equal(t, tc.want, Canonical(tc.in), tc.in)
	}
	// Every valid user name: Canonical is idempotent, stays valid, and
	// agrees with Unicode simple case folding (strings.EqualFold) — names
	// are equal canonically exactly when they fold alike.
	for b := 0; b < 256; b++ {
		s := "x" + string([]byte{byte(b)})
		if User(s) != nil {
			continue
		}
		c := Canonical(s)
		assert.NoError(t, User(c), s)
		assert.Equal(t, c, Canonical(c), s)
		assert.True(t, strings.EqualFold(s, c), s)
		assert.Equal(t, strings.ToLower(s), c, s)
	}
}

func TestCanonicalKeepsACanonicalNameUncopied(t *testing.T) {
	s := "already_canonical-1"
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = Canonical(s) }))
}

func TestBadNameCarriesItsCode(t *testing.T) {
	err := User("a b")
	assert.Equal(t, errcode.BadName, errcode.Of(err))
	assert.Equal(t, `User name "a b" may only hold A-Z a-z 0-9 _ -`, errcode.Message(err))
}
