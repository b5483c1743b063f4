package matchmaking

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Queue is one queue of the live setting matchmaking.queues.
type Queue struct {
	// Name names the queue: 1–32 of [A-Za-z0-9_-].
	Name string
	// MinSize is the fewest players a match may have ("min", 1–100).
	MinSize int
	// MaxSize is the most players a match may have ("max", MinSize–100).
	// A match is formed as soon as it can be, with up to MaxSize players.
	MaxSize int
	// Window is the skill distance a just-submitted ticket accepts
	// ("window", 0–1e9).
	Window float64
	// WidenPerSecond widens the window for every second a ticket has
	// waited ("widen_per_second", 0–1e9; default 0).
	WidenPerSecond float64
	// MaxWait is how long a ticket waits before it expires
	// ("max_wait_seconds", 1–86400; default 60).
	MaxWait time.Duration
	// MaxParty is the most users one ticket may bring ("max_party",
	// 1–MaxSize; default 1).
	MaxParty int
	// Reserve is how long the match room holds the matched players' seats
	// ("reserve_seconds", 1–3600; default 30). This package only carries
	// it; the room is the caller's.
	Reserve time.Duration
}

// WindowAt returns the skill window of a ticket that has waited wait:
// Window + WidenPerSecond × wait in seconds.
func (q Queue) WindowAt(wait time.Duration) float64 {
	if wait < 0 {
		wait = 0
	}
	return q.Window + q.WidenPerSecond*float64(wait.Milliseconds())/1000
}

// Bounds of the queue definitions.
const (
	MaxQueues    = 32      // queues in matchmaking.queues
	MaxQueueName = 32      // characters of a queue name
	MaxMatchSize = 100     // players in a match
	MaxSkill     = 1e9     // |skill| of a ticket, and the largest window or widening
	MaxWaitLimit = 86400   // seconds a ticket may wait, at most
	MaxReserve   = 3600    // seconds of reserve_seconds, at most
	maxDefsBytes = 1 << 16 // a definition longer than this is refused unread
)

// field is one number of a queue definition.
type field struct {
	name     string
	integer  bool
	required bool
	def      float64
	min, max float64
	set      func(q *Queue, v float64)
}

var fields = []field{
	{name: "min", integer: true, required: true, min: 1, max: MaxMatchSize,
		set: func(q *Queue, v float64) { q.MinSize = int(v) }},
	{name: "max", integer: true, required: true, min: 1, max: MaxMatchSize,
		set: func(q *Queue, v float64) { q.MaxSize = int(v) }},
	{name: "window", required: true, min: 0, max: MaxSkill,
		set: func(q *Queue, v float64) { q.Window = v }},
	{name: "widen_per_second", def: 0, min: 0, max: MaxSkill,
		set: func(q *Queue, v float64) { q.WidenPerSecond = v }},
	{name: "max_wait_seconds", integer: true, def: 60, min: 1, max: MaxWaitLimit,
		set: func(q *Queue, v float64) { q.MaxWait = time.Duration(v) * time.Second }},
	{name: "max_party", integer: true, def: 1, min: 1, max: MaxMatchSize,
		set: func(q *Queue, v float64) { q.MaxParty = int(v) }},
	{name: "reserve_seconds", integer: true, def: 30, min: 1, max: MaxReserve,
		set: func(q *Queue, v float64) { q.Reserve = time.Duration(v) * time.Second }},
}

func fieldNames() string {
	n := make([]string, len(fields))
	for i, f := range fields {
		n[i] = f.name
	}
	return strings.Join(n, ", ")
}

// ParseQueues parses the value of matchmaking.queues: a JSON object of queue
// name → definition, e.g.
//
//	{"duel":{"min":2,"max":2,"window":100,"widen_per_second":10,
//	         "max_wait_seconds":60,"max_party":2,"reserve_seconds":30}}
//
// "min", "max" and "window" are required, the other fields take the
// defaults Queue documents. It is strict: unknown or repeated fields and
// queues, numbers of the wrong kind or out of range, max below min,
// max_party above max, and anything after the object are refused. "" and
// "{}" define no queue. The queues come back sorted by name. The error
// wraps ErrBadQueues and says what is wrong where.
func ParseQueues(raw string) ([]Queue, error) {
	qs, err := parseQueues(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadQueues, err)
	}
	return qs, nil
}

// CheckQueues reports whether raw is a valid matchmaking.queues value: the
// validator the settings registry runs before a write. Its error is
// ParseQueues' reason alone (no package prefix), for the settings error.
func CheckQueues(raw string) error {
	_, err := parseQueues(raw)
	return err
}

func parseQueues(raw string) ([]Queue, error) {
	if len(raw) > maxDefsBytes {
		return nil, fmt.Errorf("the definitions are %d bytes, over %d", len(raw), maxDefsBytes)
	}
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(raw))
	dec.UseNumber()
	if err := expectDelim(dec, '{', "the definitions must be a JSON object of queue name → definition"); err != nil {
		return nil, err
	}
	var out []Queue
	for dec.More() {
		name, err := objectKey(dec)
		if err != nil {
			return nil, err
		}
		if err := checkQueueName(name); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(q Queue) bool { return q.Name == name }) {
			return nil, fmt.Errorf("queue %q is defined twice", name)
		}
		if len(out) == MaxQueues {
			return nil, fmt.Errorf("more than %d queues", MaxQueues)
		}
		q, err := parseQueue(dec, name)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, syntaxErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("the definitions have data after the object")
	}
	slices.SortFunc(out, func(a, b Queue) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func parseQueue(dec *json.Decoder, name string) (Queue, error) {
	q := Queue{Name: name}
	if err := expectDelim(dec, '{', fmt.Sprintf("queue %q must be an object with %s", name, fieldNames())); err != nil {
		return Queue{}, err
	}
	seen := map[string]bool{}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return Queue{}, err
		}
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == key })
		if i < 0 {
			return Queue{}, fmt.Errorf("queue %q: unknown field %q; the fields are %s", name, clip(key), fieldNames())
		}
		if seen[key] {
			return Queue{}, fmt.Errorf("queue %q: field %s is given twice", name, key)
		}
		seen[key] = true
		f := fields[i]
		tok, err := dec.Token()
		if err != nil {
			return Queue{}, syntaxErr(err)
		}
		n, ok := tok.(json.Number)
		if !ok {
			return Queue{}, fmt.Errorf("queue %q: %s must be %s; got %s", name, key, f.expect(), kindOf(tok))
		}
		v, err := strconv.ParseFloat(string(n), 64)
		if err != nil || math.IsInf(v, 0) || math.IsNaN(v) || v < f.min || v > f.max || (f.integer && v != math.Trunc(v)) {
			return Queue{}, fmt.Errorf("queue %q: %s must be %s; got %s", name, key, f.expect(), clip(string(n)))
		}
		if v == 0 {
			v = 0 // -0 is 0
		}
		f.set(&q, v)
	}
	if _, err := dec.Token(); err != nil {
		return Queue{}, syntaxErr(err)
	}
	for _, f := range fields {
		if seen[f.name] {
			continue
		}
		if f.required {
			return Queue{}, fmt.Errorf("queue %q: %s is missing (%s)", name, f.name, f.expect())
		}
		f.set(&q, f.def)
	}
	if q.MaxSize < q.MinSize {
		return Queue{}, fmt.Errorf("queue %q: max %d is below min %d", name, q.MaxSize, q.MinSize)
	}
	if q.MaxParty > q.MaxSize {
		return Queue{}, fmt.Errorf("queue %q: max_party %d is above max %d", name, q.MaxParty, q.MaxSize)
	}
	return q, nil
}

func (f field) expect() string {
	if f.integer {
		return fmt.Sprintf("an integer from %s to %s", num(f.min), num(f.max))
	}
	return fmt.Sprintf("a number from %s to %s", num(f.min), num(f.max))
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// expectDelim reads the next token, which must be the delimiter d.
func expectDelim(dec *json.Decoder, d json.Delim, want string) error {
	tok, err := dec.Token()
	if err != nil {
		return syntaxErr(err)
	}
	if tok != d {
		return fmt.Errorf("%s; got %s", want, kindOf(tok))
	}
	return nil
}

// objectKey reads an object's next key.
func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", syntaxErr(err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("invalid JSON near %v", tok)
	}
	return s, nil
}

func syntaxErr(err error) error {
	if err == io.EOF {
		return errors.New("the definitions end too early")
	}
	return fmt.Errorf("invalid JSON: %v", err)
}

// kindOf names the JSON kind of a token, with an article.
func kindOf(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case json.Delim:
		if v == '[' {
			return "an array"
		}
		return "an object"
	}
	return "something else"
}

// checkQueueName checks a queue name: 1–32 of [A-Za-z0-9_-].
func checkQueueName(name string) error {
	if name == "" || len(name) > MaxQueueName {
		return fmt.Errorf("queue name %q must be 1 to %d characters", clip(name), MaxQueueName)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("queue name %q may only hold A-Z a-z 0-9 _ -", clip(name))
		}
	}
	return nil
}

// FormatQueues returns the canonical matchmaking.queues value of qs, every
// field written: ParseQueues(FormatQueues(qs)) gives qs back (sorted).
func FormatQueues(qs []Queue) string {
	qs = slices.Clone(qs)
	slices.SortFunc(qs, func(a, b Queue) int { return strings.Compare(a.Name, b.Name) })
	var b bytes.Buffer
	b.WriteByte('{')
	for i, q := range qs {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:{\"min\":%d,\"max\":%d,\"window\":%s,\"widen_per_second\":%s,\"max_wait_seconds\":%d,\"max_party\":%d,\"reserve_seconds\":%d}",
			q.Name, q.MinSize, q.MaxSize, fnum(q.Window), fnum(q.WidenPerSecond),
			int64(q.MaxWait/time.Second), q.MaxParty, int64(q.Reserve/time.Second))
	}
	b.WriteByte('}')
	return b.String()
}

// fnum formats a number as JSON, exactly (shortest round-trip form).
func fnum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// luaNum formats a number for a script's ARGV, exactly, so that Lua's
// tonumber reads it on both engines: the embedded Redis's Lua (gopher-lua)
// reads a string without a '.' as an integer, so "1e+09" is nil there and
// "1.0e+09" is a billion.
func luaNum(f float64) string {
	s := fnum(f)
	if i := strings.IndexByte(s, 'e'); i >= 0 && !strings.Contains(s[:i], ".") {
		s = s[:i] + ".0" + s[i:]
	}
	return s
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 40
	r := []rune(s)
	if len(r) <= max {
		return s
	}
	return string(r[:max]) + "…"
}
