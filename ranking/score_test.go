package ranking

import (
	"encoding/json"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseScore(t *testing.T) {
	tests := []struct {
		in   string
		want Score
		ok   bool
	}{
		{"0", 0, true},
		{"-0", 0, true},
		{"12.5", 12500, true},
		{"-12.5", -12500, true},
		{"0.001", 1, true},
		{"-0.001", -1, true},
		{"1.2300", 1230, true},
		{"1.5e3", 1500000, true},
		{"1.5E+3", 1500000, true},
		{"15e-1", 1500, true},
		{"1e-3", 1, true},
		{"0e999999999999", 0, true},
		{"0.0000", 0, true},
		{"1000000000000000", MaxScore, true},
		{"-1000000000000000", MinScore, true},
		{"1e15", MaxScore, true},
		{"999999999999999.999", 999999999999999999, true},
		{"-999999999999999.999", -999999999999999999, true},
		{"1000000000000000.000", MaxScore, true},
		{"10000000000000000e-1", MaxScore, true},
		{"1000000000000000.001", 0, false},
		{"1e16", 0, false},
		{"9999999999999999999999", 0, false},
		{"1e999999999999999999", 0, false},
		{"0.0001", 0, false},
		{"1e-4", 0, false},
		{"1.0001", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"01", 0, false},
		{"-01", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1e", 0, false},
		{"1e+", 0, false},
		{"0x10", 0, false},
		{"NaN", 0, false},
		{"Infinity", 0, false},
		{"-Inf", 0, false},
		{"null", 0, false},
		{`"12"`, 0, false},
		{"true", 0, false},
		{"1_000", 0, false},
		{"١", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseScore(tt.in)
			if !tt.ok {
				assert.ErrorIs(t, err, ErrBadScore)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestScoreString(t *testing.T) {
	tests := []struct {
		in   Score
		want string
	}{
		{0, "0"},
		{12500, "12.5"},
		{-12500, "-12.5"},
		{1, "0.001"},
		{-1, "-0.001"},
		{10, "0.01"},
		{1230, "1.23"},
		{7000, "7"},
		{MaxScore, "1000000000000000"},
		{MinScore, "-1000000000000000"},
		{999999999999999999, "999999999999999.999"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.in.String())
			back, err := ParseScore(tt.in.String())
			require.NoError(t, err)
			assert.Equal(t, tt.in, back)
		})
	}
}

func TestFloatScore(t *testing.T) {
	t.Run("finite floats convert through their shortest spelling", func(t *testing.T) {
		for f, want := range map[float64]Score{12.345: 12345, -0.1: -100, 1e15: MaxScore, 0.001: 1, 3: 3000} {
			got, err := FloatScore(f)
			require.NoError(t, err, f)
			assert.Equal(t, want, got, f)
		}
	})
	t.Run("NaN, infinities, tiny fractions and huge values are refused", func(t *testing.T) {
		for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0.0001, 1e15 + 1, -2e15, 1e300, 5e-324} {
			_, err := FloatScore(f)
			assert.ErrorIs(t, err, ErrBadScore, f)
		}
	})
	t.Run("Float64 is the nearest float", func(t *testing.T) {
		assert.Equal(t, 12.345, Score(12345).Float64())
		assert.Equal(t, -0.001, Score(-1).Float64())
		assert.Equal(t, 1e15, MaxScore.Float64())
	})
}

func TestScoreJSON(t *testing.T) {
	t.Run("an entry is written with a plain number", func(t *testing.T) {
		b, err := json.Marshal(Entry{Player: "p", Score: 12500, Rank: 0})
		require.NoError(t, err)
		assert.JSONEq(t, `{"player":"p","score":12.5,"rank":0}`, string(b))
		assert.Equal(t, `{"player":"p","score":12.5,"rank":0}`, string(b))
	})
	t.Run("a body decodes exactly", func(t *testing.T) {
		var body struct {
			Score Score `json:"score"`
		}
		require.NoError(t, json.Unmarshal([]byte(`{"score": 999999999999999.999}`), &body))
		assert.Equal(t, Score(999999999999999999), body.Score)
	})
	t.Run("non-numbers and bad numbers are refused with ErrBadScore", func(t *testing.T) {
		for _, in := range []string{`"12"`, `null`, `true`, `[1]`, `{}`, `1e400`, `0.0001`} {
			var body struct {
				Score Score `json:"score"`
			}
			err := json.Unmarshal([]byte(`{"score": `+in+`}`), &body)
			assert.ErrorIs(t, err, ErrBadScore, in)
		}
	})
}

// FuzzParseScore checks ParseScore against an exact oracle: encoding/json's
// grammar for "is it a JSON number" and math/big for its value.
func FuzzParseScore(f *testing.F) {
	for _, s := range []string{"0", "-0", "12.5", "1e15", "-1e15", "999999999999999.999", "1e-3", "0.0001",
		"1.5E+3", "01", "1.", "NaN", "1e999999", "0e-99999", "-", "", "1000000000000000.001", "123456789.123e2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseScore(in)
		isNumber := len(in) > 0 && (in[0] == '-' || isDigit(in[0])) &&
			!strings.ContainsAny(in, " \t\r\n") && json.Valid([]byte(in))
		if !isNumber {
			if err == nil {
				t.Fatalf("ParseScore(%q) = %v, want an error: not a JSON number", in, got)
			}
			return
		}
		if err != nil && !strings.Contains(err.Error(), ErrBadScore.Error()) {
			t.Fatalf("ParseScore(%q) error %v does not wrap ErrBadScore", in, err)
		}
		// The oracle: the exact value in thousandths, when the exponent is small
		// enough for math/big to expand it quickly.
		if i := strings.IndexAny(in, "eE"); i >= 0 && len(strings.TrimLeft(in[i+1:], "+-0")) > 4 {
			return
		}
		r, ok := new(big.Rat).SetString(in)
		if !ok {
			t.Fatalf("math/big refuses the JSON number %q", in)
		}
		r.Mul(r, big.NewRat(1000, 1))
		inDomain := r.IsInt() && r.Num().CmpAbs(big.NewInt(int64(MaxScore))) <= 0
		switch {
		case inDomain && err != nil:
			t.Fatalf("ParseScore(%q) refused a score in the domain: %v", in, err)
		case !inDomain && err == nil:
			t.Fatalf("ParseScore(%q) = %v, want ErrBadScore", in, got)
		case inDomain && r.Num().Int64() != int64(got):
			t.Fatalf("ParseScore(%q) = %d thousandths, want %s", in, int64(got), r.Num())
		}
		if err == nil {
			back, err := ParseScore(got.String())
			if err != nil || back != got {
				t.Fatalf("String %q of %q does not parse back: %v %v", got.String(), in, back, err)
			}
		}
	})
}
