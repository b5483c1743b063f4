package names

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
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

func FuzzNames(f *testing.F) {
	for _, s := range []string{"alice", "general-3", "a}{b", "clicks@daily", "", "\x00", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, check := range []func(string) error{User, Lobby, Board, Item, Room, Player} {
			err := check(s)
			if err != nil {
				if !errors.Is(err, ErrBadName) {
					t.Fatalf("error %v does not wrap ErrBadName", err)
				}
				if !utf8.ValidString(err.Error()) && utf8.ValidString(s) {
					t.Fatalf("message is not valid UTF-8")
				}
				continue
			}
			if strings.ContainsAny(s, "{}*?[]: \n\x00") {
				t.Fatalf("accepted %q", s)
			}
		}
	})
}
