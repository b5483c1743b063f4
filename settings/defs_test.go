package settings

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefsMatchTheProtocol(t *testing.T) {
	want := map[string]any{
		RoomCapacity: 50, MessageMaxLength: 2000, RateMessagesPerSecond: 10.0,
		SeatLeaseSeconds: 30, MOTD: "", SeenCapacity: 10000, SeenFPRate: 0.01,
		SeenTTLSeconds: 604800, SessionIdleSeconds: 1800, ConnectionsPerIP: 500, SessionsPerIPPerMin: 120,
		NewBoardsPerUserPerMin: 10, PermanentBoards: "", NewLobbiesPerUserPerMin: 10, SeatsPerUser: 20, ConnectionsPerNode: 50000, MessageDurability: "none",
		ShopDurability:       "none",
		NewBoardsPerIPPerMin: 30, ScorePostsPerUserPerMin: 600,
		MatchmakingQueues: DefaultMatchmakingQueues,
		PlayersPerBoard:   10000,
	}
	got := map[string]any{}
	for _, d := range Defs() {
		got[d.Key] = d.Default
		assert.NotEmpty(t, d.Description, d.Key)
		v, err := Validate(d.Key, encode(d.Default))
		require.NoError(t, err, "the default of %s is valid", d.Key)
		assert.Equal(t, d.Default, v)
	}
	assert.Equal(t, want, got)
	d, ok := Lookup(RoomCapacity)
	assert.True(t, ok)
	assert.Equal(t, TypeInt, d.Type)
	_, ok = Lookup("nope")
	assert.False(t, ok)
}

func TestValidate(t *testing.T) {
	ok := []struct {
		key  string
		raw  string
		want any
	}{
		{RoomCapacity, `1`, 1},
		{RoomCapacity, `10000`, 10000},
		{RoomCapacity, ` 60 `, 60},
		{RoomCapacity, `2.0`, 2},
		{RoomCapacity, `2e3`, 2000},
		{SeenCapacity, `10000000`, 10000000},
		{MessageMaxLength, `16384`, 16384},
		{SeatLeaseSeconds, `2`, 2},
		{RateMessagesPerSecond, `0.5`, 0.5},
		{RateMessagesPerSecond, `10000`, 10000.0},
		{RateMessagesPerSecond, `1e-9`, 1e-9},
		{SeenFPRate, `0.0001`, 0.0001},
		{SeenFPRate, `0.1`, 0.1},
		{MOTD, `""`, ""},
		{MOTD, `"a:b {c} \"d\""`, `a:b {c} "d"`},
		{MOTD, `"` + strings.Repeat("é", 1000) + `"`, strings.Repeat("é", 1000)},
		{MOTD, `"<b>&</b>"`, "<b>&</b>"},
		{MessageDurability, `"none"`, "none"},
		{MessageDurability, `"replica"`, "replica"},
		{ShopDurability, `"none"`, "none"},
		{ShopDurability, `"replica"`, "replica"},
		{MatchmakingQueues, `""`, ""},
		{MatchmakingQueues, `"{}"`, "{}"},
		{MatchmakingQueues, `"{\"duel\":{\"min\":2,\"max\":2,\"window\":50}}"`, `{"duel":{"min":2,"max":2,"window":50}}`},
	}
	for _, tt := range ok {
		t.Run("accepts "+tt.key+"="+clip(tt.raw), func(t *testing.T) {
			v, err := Validate(tt.key, json.RawMessage(tt.raw))
			require.NoError(t, err)
			assert.Equal(t, tt.want, v)
		})
	}

	bad := []struct {
		key    string
		raw    string
		reason string
	}{
		{RoomCapacity, `0`, "room.capacity must be an integer from 1 to 10000; got 0"},
		{RoomCapacity, `10001`, "room.capacity must be an integer from 1 to 10000; got 10001"},
		{RoomCapacity, `2.5`, "room.capacity must be an integer from 1 to 10000; got 2.5, which has a fraction"},
		{RoomCapacity, `"50"`, "room.capacity must be an integer from 1 to 10000; got a string"},
		{RoomCapacity, `null`, "room.capacity must be an integer from 1 to 10000; got null"},
		{RoomCapacity, `true`, "room.capacity must be an integer from 1 to 10000; got a boolean"},
		{RoomCapacity, `[1]`, "room.capacity must be an integer from 1 to 10000; got an array"},
		{RoomCapacity, `{"v":1}`, "room.capacity must be an integer from 1 to 10000; got an object"},
		{RoomCapacity, ``, "room.capacity must be an integer from 1 to 10000; no value was given"},
		{RoomCapacity, `1e400`, "room.capacity must be an integer from 1 to 10000; got 1e400"},
		{RoomCapacity, `1 2`, "room.capacity must be an integer from 1 to 10000; got invalid JSON 1 2"},
		{RoomCapacity, `-0`, "room.capacity must be an integer from 1 to 10000; got -0"},
		{SeatLeaseSeconds, `1`, "seat.lease_seconds must be an integer from 2 to 3600; got 1"},
		{SeenCapacity, `99`, "seen.capacity must be an integer from 100 to 10000000; got 99"},
		{MessageMaxLength, `16385`, "message.max_length must be an integer from 1 to 16384; got 16385"},
		{RateMessagesPerSecond, `0`, "rate.messages_per_second must be a number greater than 0 and at most 10000; got 0"},
		{RateMessagesPerSecond, `-1`, "rate.messages_per_second must be a number greater than 0 and at most 10000; got -1"},
		{RateMessagesPerSecond, `10000.5`, "rate.messages_per_second must be a number greater than 0 and at most 10000; got 10000.5"},
		{RateMessagesPerSecond, `"fast"`, "rate.messages_per_second must be a number greater than 0 and at most 10000; got a string"},
		{SeenFPRate, `0.2`, "seen.fp_rate must be a number from 0.0001 to 0.1; got 0.2"},
		{SeenFPRate, `0.00009`, "seen.fp_rate must be a number from 0.0001 to 0.1; got 0.00009"},
		{MOTD, `42`, "motd must be a string of at most 1000 characters; got a number"},
		{MOTD, `null`, "motd must be a string of at most 1000 characters; got null"},
		{MOTD, `"` + strings.Repeat("é", 1001) + `"`, "motd must be a string of at most 1000 characters; got 1001 characters"},
		{MOTD, `"unterminated`, "motd must be a string of at most 1000 characters; got invalid JSON \"unterminated"},
		{MessageDurability, `"fast"`, `message.durability must be one of "none", "replica"; got "fast"`},
		{MessageDurability, `"Replica"`, `message.durability must be one of "none", "replica"; got "Replica"`},
		{MessageDurability, `""`, `message.durability must be one of "none", "replica"; got ""`},
		{MessageDurability, `1`, `message.durability must be one of "none", "replica"; got a number`},
		{ShopDurability, `"REPLICA"`, `shop.durability must be one of "none", "replica"; got "REPLICA"`},
		{ShopDurability, `true`, `shop.durability must be one of "none", "replica"; got a boolean`},
		{MatchmakingQueues, `{"duel":{}}`, "matchmaking.queues must be a string of at most 16000 characters; got an object"},
		{MatchmakingQueues, `"{\"duel\":{\"min\":2}}"`, `matchmaking.queues: queue "duel": max is missing (an integer from 1 to 100)`},
		{MatchmakingQueues, `"{\"duel\":{\"min\":3,\"max\":2,\"window\":1}}"`, `matchmaking.queues: queue "duel": max 2 is below min 3`},
		{MatchmakingQueues, `"[1]"`, `matchmaking.queues: the definitions must be a JSON object of queue name → definition; got an array`},
	}
	for _, tt := range bad {
		t.Run("refuses "+tt.key+"="+clip(tt.raw), func(t *testing.T) {
			v, err := Validate(tt.key, json.RawMessage(tt.raw))
			assert.Nil(t, v)
			require.ErrorIs(t, err, ErrBadValue)
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, tt.reason, e.Reason)
			assert.Equal(t, tt.key, e.Key)
			assert.Equal(t, "settings: "+tt.reason, err.Error())
		})
	}

	t.Run("refuses an unknown key and names the known ones", func(t *testing.T) {
		_, err := Validate("room.capacityy", json.RawMessage(`5`))
		require.ErrorIs(t, err, ErrUnknownSetting)
		assert.NotErrorIs(t, err, ErrBadValue)
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Contains(t, e.Reason, `unknown setting "room.capacityy"`)
		assert.Contains(t, e.Reason, RoomCapacity)
	})

	t.Run("long bad values are clipped in the reason", func(t *testing.T) {
		_, err := Validate(RoomCapacity, json.RawMessage(strings.Repeat("9", 500)))
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Less(t, len(e.Reason), 150)
	})
}

func TestEncodeIsCanonical(t *testing.T) {
	assert.Equal(t, `2000`, string(encode(2000)))
	assert.Equal(t, `0.5`, string(encode(0.5)))
	assert.Equal(t, `10`, string(encode(10.0)))
	assert.Equal(t, `"<a>&:\"b\""`, string(encode(`<a>&:"b"`)))
}

// FuzzValidate: Validate never panics; what it accepts has the setting's Go
// type, and its canonical JSON validates back to the same value; what it
// refuses comes with a reason.
func FuzzValidate(f *testing.F) {
	for _, d := range Defs() {
		for _, raw := range []string{`0`, `1`, `-1`, `2.5`, `2.0`, `1e3`, `1e400`, `0.01`, `""`, `"x"`, `null`,
			`true`, `[]`, `{}`, `"` + strings.Repeat("a", 1001) + `"`, `"\u00e9\ud800"`, ``, ` `, `1 2`, `"\x00"`} {
			f.Add(d.Key, []byte(raw))
		}
	}
	f.Add("unknown", []byte(`1`))
	f.Fuzz(func(t *testing.T, key string, raw []byte) {
		v, err := Validate(key, raw)
		if err != nil {
			var e *Error
			require.True(t, errors.As(err, &e))
			require.NotEmpty(t, e.Reason)
			require.True(t, errors.Is(err, ErrBadValue) || errors.Is(err, ErrUnknownSetting))
			require.Nil(t, v)
			return
		}
		d, ok := Lookup(key)
		require.True(t, ok)
		switch d.Type {
		case TypeInt:
			n, ok := v.(int)
			require.True(t, ok, "%T", v)
			require.True(t, float64(n) >= d.Min && float64(n) <= d.Max)
		case TypeNumber:
			n, ok := v.(float64)
			require.True(t, ok, "%T", v)
			require.True(t, n > d.Min || (!d.MinExclusive && n == d.Min))
			require.LessOrEqual(t, n, d.Max)
		case TypeString:
			str, ok := v.(string)
			require.True(t, ok, "%T", v)
			if len(d.Enum) > 0 {
				require.Contains(t, d.Enum, str)
			}
		}
		again, err := Validate(key, encode(v))
		require.NoError(t, err)
		require.Equal(t, v, again)
	})
}
