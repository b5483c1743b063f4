package settings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/chatd/chatd/matchmaking"
)

// The keys of the registry, as in docs/PROTOCOL.md's "Live settings" table.
const (
	RoomCapacity            = "room.capacity"
	MessageMaxLength        = "message.max_length"
	RateMessagesPerSecond   = "rate.messages_per_second"
	SeatLeaseSeconds        = "seat.lease_seconds"
	MOTD                    = "motd"
	SeenCapacity            = "seen.capacity"
	SeenFPRate              = "seen.fp_rate"
	SeenTTLSeconds          = "seen.ttl_seconds"
	SessionIdleSeconds      = "session.idle_seconds"
	ConnectionsPerIP        = "limit.connections_per_ip"
	SessionsPerIPPerMin     = "limit.sessions_per_ip_per_minute"
	NewBoardsPerUserPerMin  = "limit.new_boards_per_user_per_minute"
	PermanentBoards         = "boards.permanent"
	NewLobbiesPerUserPerMin = "limit.new_lobbies_per_user_per_minute"
	SeatsPerUser            = "limit.seats_per_user"
	ConnectionsPerNode      = "limit.connections_per_node"
	MessageDurability       = "message.durability"
	ShopDurability          = "shop.durability"
	ScorePostsPerUserPerMin = "limit.score_posts_per_user_per_minute"
	NewBoardsPerIPPerMin    = "limit.new_boards_per_ip_per_minute"
	MatchmakingQueues       = "matchmaking.queues"
	PlayersPerBoard         = "limit.players_per_board"
)

// DefaultMatchmakingQueues is the default of matchmaking.queues: one queue,
// "quick", of two players.
const DefaultMatchmakingQueues = `{"quick":{"min":2,"max":2,"window":100,"widen_per_second":20,"max_wait_seconds":60,"max_party":2,"reserve_seconds":30}}`

// The value types of a Def.
const (
	// TypeInt is a JSON number with no fraction: 2, 2.0 and 2e3 are
	// integers (mathematically they have no fraction), 2.5 is not. Read it
	// with Int.
	TypeInt = "int"
	// TypeNumber is any finite JSON number. Read it with Float.
	TypeNumber = "number"
	// TypeString is a JSON string; its length is counted in characters
	// (Unicode code points), not bytes. Read it with String.
	TypeString = "string"
)

// MaxRate is the upper bound of rate.messages_per_second. The protocol only
// says "> 0"; a bound keeps a typo (1e9) from turning the limiter off
// silently, and 10000 messages per second per user is far beyond any chat.
const MaxRate = 10000

// Def describes one setting.
type Def struct {
	// Key names the setting, e.g. "room.capacity".
	Key string `json:"key"`
	// Type is TypeInt, TypeNumber or TypeString.
	Type string `json:"type"`
	// Description is one line for operators.
	Description string `json:"description"`
	// Default is the value in force while the setting is not set: an int,
	// a float64 or a string, after Type.
	Default any `json:"default"`
	// Min and Max bound an int or number (inclusive unless MinExclusive);
	// for a string Max is the most characters and Min the fewest.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// MinExclusive makes Min itself invalid ("> 0").
	MinExclusive bool `json:"min_exclusive"`
	// Enum, when not empty, lists the only values a string may take.
	Enum []string `json:"enum,omitempty"`
	// Check, when not nil, validates a string that passed the checks
	// above (a string holding a structured value, such as JSON); its error
	// says what is wrong, and becomes the refusal's reason.
	Check func(string) error `json:"-"`
}

var defs = []Def{
	{Key: RoomCapacity, Type: TypeInt, Default: 50, Min: 1, Max: 10000,
		Description: "seats per room; a full lobby gets a new room"},
	{Key: MessageMaxLength, Type: TypeInt, Default: 2000, Min: 1, Max: 16384,
		Description: "longest chat text, in characters; longer is refused with too_long"},
	{Key: RateMessagesPerSecond, Type: TypeNumber, Default: 10.0, Min: 0, MinExclusive: true, Max: MaxRate,
		Description: "messages per second per user in each lobby, across all nodes (token bucket, burst max(1, rate))"},
	{Key: SeatLeaseSeconds, Type: TypeInt, Default: 30, Min: 2, Max: 3600,
		Description: "seconds after which a seat whose node stopped heartbeating is freed"},
	{Key: MOTD, Type: TypeString, Default: "", Min: 0, Max: 1000,
		Description: "message of the day, shown on connect and pushed live on change"},
	{Key: SeenCapacity, Type: TypeInt, Default: 10000, Min: 100, Max: 10000000,
		Description: "items per user a new seen-filter is sized for"},
	{Key: SeenFPRate, Type: TypeNumber, Default: 0.01, Min: 0.0001, Max: 0.1,
		Description: "false-positive rate a new seen-filter is sized for"},
	{Key: SeenTTLSeconds, Type: TypeInt, Default: 7 * 24 * 3600, Min: 3600, Max: 90 * 24 * 3600,
		Description: "seconds a user's seen-filter is kept after its last mark"},
	{Key: SessionIdleSeconds, Type: TypeInt, Default: 1800, Min: 60, Max: 7 * 24 * 3600,
		Description: "seconds a guest name stays held by its session after the session's last request or open WebSocket"},
	{Key: ConnectionsPerIP, Type: TypeInt, Default: 500, Min: 0, Max: 1000000,
		Description: "open WebSockets from one client address across all nodes; 0 = no cap"},
	{Key: SessionsPerIPPerMin, Type: TypeInt, Default: 120, Min: 0, Max: 1000000,
		Description: "POST /api/v1/session per client address in any 60 s (a sliding window) across all nodes; 0 = no cap"},
	{Key: NewBoardsPerUserPerMin, Type: TypeInt, Default: 10, Min: 0, Max: 1000000,
		Description: "leaderboards a user may create (first post to a board that does not exist) per minute across all nodes; 0 = no cap"},
	{Key: NewBoardsPerIPPerMin, Type: TypeInt, Default: 30, Min: 0, Max: 1000000,
		Description: "leaderboards one client address may create per minute across all nodes (besides the per-user cap); 0 = no cap"},
	{Key: ScorePostsPerUserPerMin, Type: TypeInt, Default: 600, Min: 0, Max: 1000000,
		Description: "score posts a user may make per minute across all nodes; 0 = no cap; over it the post answers 429 rate_limited"},
	{Key: SeatsPerUser, Type: TypeInt, Default: 20, Min: 0, Max: 100000,
		Description: "lobbies a user may hold a seat in at once, across all nodes; 0 = no cap; a join, REST join or resume into one more answers 429 rate_limited"},
	{Key: ConnectionsPerNode, Type: TypeInt, Default: 50000, Min: 0, Max: 10000000,
		Description: "open WebSockets on one node; 0 = no cap; over it the upgrade answers 429 too_many_connections (reconnect: the balancer may pick another node)"},
	{Key: NewLobbiesPerUserPerMin, Type: TypeInt, Default: 10, Min: 0, Max: 1000000,
		Description: "lobbies a user may create (a join of a lobby that has no room yet) per minute across all nodes; 0 = no cap"},
	{Key: PermanentBoards, Type: TypeString, Default: "", Min: 0, Max: 2000,
		Description: "comma-separated all-time boards that never expire; every other all-time board expires 30 days after its last post"},
	{Key: MessageDurability, Type: TypeString, Default: "none", Min: 4, Max: 7, Enum: []string{"none", "replica"},
		Description: "none: a message is acked once its master stored it; replica: only once a replica holds it too (WAIT), else the say is refused with not_durable"},
	{Key: ShopDurability, Type: TypeString, Default: "none", Min: 4, Max: 7, Enum: []string{"none", "replica"},
		Description: "none: a purchase, grant or restock is acked once its master applied it; replica: only once a replica holds it too (WAIT), else it answers not_durable (applied all the same: retry a purchase or grant with its Idempotency-Key)"},
	{Key: MatchmakingQueues, Type: TypeString, Default: DefaultMatchmakingQueues, Min: 0, Max: 16000, Check: matchmaking.CheckQueues,
		Description: `matchmaking queues as JSON: {"name":{"min","max","window","widen_per_second","max_wait_seconds","max_party","reserve_seconds"}}; "" = none`},
	{Key: PlayersPerBoard, Type: TypeInt, Default: 10000, Min: 1, Max: 10000000,
		Description: "players one leaderboard (one period of a daily or weekly board) may hold; a post of a new player to a full board is refused with board_full; the players on it may still post"},
}

var byKey = func() map[string]*Def {
	m := make(map[string]*Def, len(defs))
	for i := range defs {
		m[defs[i].Key] = &defs[i]
	}
	return m
}()

// Defs returns the registry, in the order of docs/PROTOCOL.md's table.
func Defs() []Def {
	return append([]Def(nil), defs...)
}

// Lookup returns the definition of key.
func Lookup(key string) (Def, bool) {
	d, ok := byKey[key]
	if !ok {
		return Def{}, false
	}
	return *d, true
}

// expect says what a valid value looks like, e.g. "an integer from 1 to 10000".
func (d *Def) expect() string {
	switch d.Type {
	case TypeInt:
		return fmt.Sprintf("an integer from %s to %s", num(d.Min), num(d.Max))
	case TypeNumber:
		if d.MinExclusive {
			return fmt.Sprintf("a number greater than %s and at most %s", num(d.Min), num(d.Max))
		}
		return fmt.Sprintf("a number from %s to %s", num(d.Min), num(d.Max))
	default:
		if len(d.Enum) > 0 {
			return "one of " + quoteAll(d.Enum)
		}
		if d.Min > 0 {
			return fmt.Sprintf("a string of %s to %s characters", num(d.Min), num(d.Max))
		}
		return fmt.Sprintf("a string of at most %s characters", num(d.Max))
	}
}

// quoteAll lists ss as JSON strings: "a", "b".
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// Validate checks raw, the JSON value proposed for key, and returns it as
// the Go value reads return: an int for TypeInt, a float64 for TypeNumber, a
// string for TypeString. It touches nothing but its arguments. The error is
// an *Error wrapping ErrUnknownSetting for a key not in the registry, or
// ErrBadValue for a value of the wrong JSON type or out of range.
func Validate(key string, raw json.RawMessage) (any, error) {
	d, ok := byKey[key]
	if !ok {
		return nil, unknown(key)
	}
	return d.validate(raw)
}

// unknown is the error for a key not in the registry.
func unknown(key string) error {
	known := make([]string, len(defs))
	for i := range defs {
		known[i] = defs[i].Key
	}
	return &Error{Key: key, Err: ErrUnknownSetting,
		Reason: fmt.Sprintf("unknown setting %q; the settings are %s", clip(key), strings.Join(known, ", "))}
}

func (d *Def) validate(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, badValue(d, "no value was given")
	}
	if !json.Valid(raw) {
		return nil, badValue(d, "got invalid JSON %s", clip(string(raw)))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badValue(d, "got invalid JSON %s", clip(string(raw)))
	}
	switch d.Type {
	case TypeInt, TypeNumber:
		n, ok := v.(json.Number)
		if !ok {
			return nil, badValue(d, "got %s", jsonKind(v))
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, badValue(d, "got %s", clip(string(n)))
		}
		if f < d.Min || (d.MinExclusive && f == d.Min) || f > d.Max {
			return nil, badValue(d, "got %s", clip(string(n)))
		}
		if d.Type == TypeNumber {
			return f, nil
		}
		if f != math.Trunc(f) {
			return nil, badValue(d, "got %s, which has a fraction", clip(string(n)))
		}
		return int(f), nil
	default:
		s, ok := v.(string)
		if !ok {
			return nil, badValue(d, "got %s", jsonKind(v))
		}
		if len(d.Enum) > 0 && !slices.Contains(d.Enum, s) {
			return nil, badValue(d, "got %q", clip(s))
		}
		if n := utf8.RuneCountInString(s); float64(n) > d.Max || float64(n) < d.Min {
			return nil, badValue(d, "got %d characters", n)
		}
		if d.Check != nil {
			if err := d.Check(s); err != nil {
				return nil, &Error{Key: d.Key, Reason: d.Key + ": " + err.Error(), Err: ErrBadValue}
			}
		}
		return s, nil
	}
}

// jsonKind names the JSON type of a decoded value, with an article.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	default:
		return "an object"
	}
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 40
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max]) + "…"
}

// encode returns the canonical JSON of a validated value: what the hash
// stores and the change carries.
func encode(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // int, float64 or string: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// def returns the definition of key, panicking for an unknown key: the
// typed reads and Watch take keys from the constants above, so an unknown
// key is a bug in the caller.
func def(key string) *Def {
	d, ok := byKey[key]
	if !ok {
		panic(fmt.Sprintf("settings: unknown setting %q", key))
	}
	return d
}
