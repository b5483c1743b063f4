package matchmaking

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/errcode"
)

func TestParseQueues(t *testing.T) {
	t.Run("a full definition", func(t *testing.T) {
		qs, err := ParseQueues(`{"duel":{"min":2,"max":2,"window":100,"widen_per_second":10,"max_wait_seconds":60,"max_party":2,"reserve_seconds":30},
			"team":{"min":4,"max":4,"window":50.5}}`)
		require.NoError(t, err)
		assert.Equal(t, []Queue{
			{Name: "duel", MinSize: 2, MaxSize: 2, Window: 100, WidenPerSecond: 10, MaxWait: time.Minute, MaxParty: 2, Reserve: 30 * time.Second},
			{Name: "team", MinSize: 4, MaxSize: 4, Window: 50.5, WidenPerSecond: 0, MaxWait: time.Minute, MaxParty: 1, Reserve: 30 * time.Second},
		}, qs, "sorted by name, defaults filled in")
	})
	t.Run("no queues", func(t *testing.T) {
		for _, raw := range []string{"", "  ", "{}", " { } "} {
			qs, err := ParseQueues(raw)
			require.NoError(t, err, raw)
			assert.Empty(t, qs)
		}
	})
	t.Run("integers may be written with an exponent", func(t *testing.T) {
		qs, err := ParseQueues(`{"a":{"min":2.0,"max":1e1,"window":0}}`)
		require.NoError(t, err)
		assert.Equal(t, 10, qs[0].MaxSize)
	})

	bad := []struct{ raw, reason string }{
		{`[]`, "the definitions must be a JSON object of queue name → definition; got an array"},
		{`"duel"`, "the definitions must be a JSON object of queue name → definition; got a string"},
		{`{"duel":1}`, `queue "duel" must be an object with min, max, window, widen_per_second, max_wait_seconds, max_party, reserve_seconds; got a number`},
		{`{"duel":{"min":2,"max":2}}`, `queue "duel": window is missing (a number from 0 to 1000000000)`},
		{`{"duel":{"max":2,"window":1}}`, `queue "duel": min is missing (an integer from 1 to 100)`},
		{`{"duel":{"min":2,"max":2,"window":1,"windw":3}}`, `queue "duel": unknown field "windw"; the fields are min, max, window, widen_per_second, max_wait_seconds, max_party, reserve_seconds`},
		{`{"duel":{"min":2,"min":3,"max":2,"window":1}}`, `queue "duel": field min is given twice`},
		{`{"duel":{"min":2,"max":2,"window":1},"duel":{"min":2,"max":2,"window":1}}`, `queue "duel" is defined twice`},
		{`{"duel":{"min":2.5,"max":3,"window":1}}`, `queue "duel": min must be an integer from 1 to 100; got 2.5`},
		{`{"duel":{"min":0,"max":3,"window":1}}`, `queue "duel": min must be an integer from 1 to 100; got 0`},
		{`{"duel":{"min":2,"max":101,"window":1}}`, `queue "duel": max must be an integer from 1 to 100; got 101`},
		{`{"duel":{"min":3,"max":2,"window":1}}`, `queue "duel": max 2 is below min 3`},
		{`{"duel":{"min":2,"max":2,"window":1,"max_party":3}}`, `queue "duel": max_party 3 is above max 2`},
		{`{"duel":{"min":2,"max":2,"window":-1}}`, `queue "duel": window must be a number from 0 to 1000000000; got -1`},
		{`{"duel":{"min":2,"max":2,"window":1e400}}`, `queue "duel": window must be a number from 0 to 1000000000; got 1e400`},
		{`{"duel":{"min":2,"max":2,"window":"1"}}`, `queue "duel": window must be a number from 0 to 1000000000; got a string`},
		{`{"duel":{"min":2,"max":2,"window":null}}`, `queue "duel": window must be a number from 0 to 1000000000; got null`},
		{`{"duel":{"min":2,"max":2,"window":[1]}}`, `queue "duel": window must be a number from 0 to 1000000000; got an array`},
		{`{"duel":{"min":2,"max":2,"window":1,"max_wait_seconds":0}}`, `queue "duel": max_wait_seconds must be an integer from 1 to 86400; got 0`},
		{`{"duel":{"min":2,"max":2,"window":1,"reserve_seconds":3601}}`, `queue "duel": reserve_seconds must be an integer from 1 to 3600; got 3601`},
		{`{"du el":{"min":2,"max":2,"window":1}}`, `queue name "du el" may only hold A-Z a-z 0-9 _ -`},
		{`{"":{"min":2,"max":2,"window":1}}`, `queue name "" must be 1 to 32 characters`},
		{`{"a{b}":{"min":2,"max":2,"window":1}}`, `queue name "a{b}" may only hold A-Z a-z 0-9 _ -`},
		{`{"duel":{"min":2,"max":2,"window":1}} {}`, "the definitions have data after the object"},
		{`{"duel":{"min":2,"max":2,"window":1}`, "the definitions end too early"},
		{`{"duel":{"min":2,,}}`, "invalid JSON: invalid character ',' looking for beginning of object key string"},
	}
	for _, tt := range bad {
		t.Run("refuses "+clip(tt.raw), func(t *testing.T) {
			qs, err := ParseQueues(tt.raw)
			assert.Nil(t, qs)
			require.ErrorIs(t, err, ErrBadQueues)
			assert.Equal(t, errcode.BadValue, errcode.Of(err))
			assert.Equal(t, "matchmaking: bad queue definitions: "+tt.reason, err.Error())
			assert.Equal(t, tt.reason, CheckQueues(tt.raw).Error(), "the settings registry's reason")
		})
	}
	t.Run("refuses more than 32 queues", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("{")
		for i := range 33 {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"q` + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26)) + `":{"min":1,"max":1,"window":0}`)
		}
		b.WriteString("}")
		_, err := ParseQueues(b.String())
		assert.ErrorContains(t, err, "more than 32 queues")
	})
	t.Run("refuses definitions over 64 KiB unread", func(t *testing.T) {
		_, err := ParseQueues(`{"a":{"min":1,"max":1,"window":0` + strings.Repeat(" ", 1<<16) + `}}`)
		assert.ErrorContains(t, err, "bytes, over 65536")
	})
}

func TestFormatQueuesRoundTrips(t *testing.T) {
	qs := []Queue{
		{Name: "team", MinSize: 3, MaxSize: 4, Window: 0.1, WidenPerSecond: 1e9, MaxWait: 86400 * time.Second, MaxParty: 4, Reserve: time.Second},
		{Name: "duel", MinSize: 2, MaxSize: 2, Window: 100, WidenPerSecond: 10, MaxWait: time.Minute, MaxParty: 2, Reserve: 30 * time.Second},
	}
	raw := FormatQueues(qs)
	got, err := ParseQueues(raw)
	require.NoError(t, err)
	assert.Equal(t, []Queue{qs[1], qs[0]}, got)
}

func TestWindowAt(t *testing.T) {
	q := Queue{Window: 100, WidenPerSecond: 10}
	assert.Equal(t, 100.0, q.WindowAt(0))
	assert.Equal(t, 125.0, q.WindowAt(2500*time.Millisecond))
	assert.Equal(t, 100.0, q.WindowAt(-time.Second), "a clock that went back does not narrow it")
}

// FuzzParseQueues: ParseQueues never panics; what it accepts is within
// bounds and comes back the same through FormatQueues; what it refuses
// wraps ErrBadQueues with a reason.
func FuzzParseQueues(f *testing.F) {
	for _, s := range []string{``, `{}`, `[]`, `null`, `{"duel":{"min":2,"max":2,"window":100}}`,
		`{"duel":{"min":2,"max":2,"window":100,"widen_per_second":10,"max_wait_seconds":60,"max_party":2,"reserve_seconds":30}}`,
		`{"a":{"min":1,"max":100,"window":1e9,"widen_per_second":0.5}}`, `{"a":{"min":2,"max":1,"window":0}}`,
		`{"a":{"min":2,"max":2,"window":0}}x`, `{"a":{"min":-0,"max":2,"window":-0}}`, `{"\u00e9":{}}`, `{"a":{"min":1e-400}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		qs, err := ParseQueues(raw)
		if err != nil {
			require.ErrorIs(t, err, ErrBadQueues)
			require.NotEmpty(t, strings.TrimPrefix(err.Error(), ErrBadQueues.Message))
			require.Nil(t, qs)
			return
		}
		require.LessOrEqual(t, len(qs), MaxQueues)
		for i, q := range qs {
			require.NoError(t, checkQueueName(q.Name))
			if i > 0 {
				require.Less(t, qs[i-1].Name, q.Name)
			}
			require.True(t, 1 <= q.MinSize && q.MinSize <= q.MaxSize && q.MaxSize <= MaxMatchSize, "%+v", q)
			require.True(t, 1 <= q.MaxParty && q.MaxParty <= q.MaxSize, "%+v", q)
			require.True(t, q.Window >= 0 && q.Window <= MaxSkill && q.WidenPerSecond >= 0 && q.WidenPerSecond <= MaxSkill, "%+v", q)
			require.True(t, q.MaxWait >= time.Second && q.Reserve >= time.Second, "%+v", q)
		}
		again, err := ParseQueues(FormatQueues(qs))
		require.NoError(t, err)
		if len(qs) == 0 {
			require.Empty(t, again)
			return
		}
		require.Equal(t, qs, again)
	})
}
