package matchmaking

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// engines are the two Redis engines every script must run on: a real
// redis-server and the embedded miniredis of `go run ./cmd/chatd`, whose
// Lua (gopher-lua) has no struct, cmsgpack or bit library.
var engines = []struct {
	name string
	get  func(testing.TB) *redistest.Redis
}{
	{"server", redistest.Real},
	{"embedded", redistest.InProcess},
}

// TestPickSkillCodecOnBothEngines runs queue_pick.lua's skill functions
// (its source up to size_of, then a probe) on both engines: skill_hex must
// write what skillKey writes, and skill_of must read it back exactly, for
// ordinary, extreme and subnormal skills.
func TestPickSkillCodecOnBothEngines(t *testing.T) {
	head, _, ok := strings.Cut(queuePickSrc, "local function size_of(entry)")
	require.True(t, ok, "queue_pick.lua has no size_of")
	// Skip the part of the head that reads ARGV and writes the outbox.
	_, funcs, ok := strings.Cut(head, "-- IEEE 754 binary64 in plain Lua")
	require.True(t, ok)
	probe := redis.NewScript("-- IEEE 754 binary64 in plain Lua" + funcs + `
local x = tonumber(ARGV[1])
return {skill_hex(x), string.format('%.17g', skill_of(string.rep('0', 16) .. ARGV[2] .. '01'))}
`)
	values := []float64{0, 1, -1, 1.5, -1.5, 123.456, -123.456, 1e-3, MaxSkill, -MaxSkill, 1e6 + 0.25,
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 1e-310, -1e-310, math.MaxFloat64, -math.MaxFloat64,
		2.2250738585072014e-308, 0.1, 1.0 / 3}
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			r := e.get(t)
			for _, f := range values {
				v, err := probe.Run(context.Background(), r.Client, nil, luaNum(f), skillKey(f)).StringSlice()
				require.NoError(t, err, "skill %v", f)
				assert.Equal(t, skillKey(f), v[0], "skill_hex(%v)", f)
				back, err := strconv.ParseFloat(v[1], 64)
				require.NoError(t, err)
				assert.Equal(t, f, back, "skill_of(skillKey(%v))", f)
			}
		})
	}
}

// TestEveryScriptRunsOnBothEngines really runs each matchmaking script
// on both engines: a submission, a cancel, a pick that finds a match and
// an expiry, and the formation of both (queue_pick.lua once called
// struct.pack, which the embedded Redis lacks: every round failed there),
// and a party's invitation, acceptance and expiry.
func TestEveryScriptRunsOnBothEngines(t *testing.T) {
	t.Parallel()
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			n, clock, rec, _ := one(t, e.get(t), `{"duel":{"min":2,"max":2,"window":1e9,"widen_per_second":0.5,"max_wait_seconds":60,"max_party":2}}`)
			s := n.svc
			c := submit(t, s, "duel", Ticket{User: "c", Skill: 5000})
			st, err := s.Cancel(context.Background(), "duel", c)
			require.NoError(t, err, "ticket_cancel.lua")
			assert.Equal(t, Cancelled, st.State)

			x := submit(t, s, "duel", Ticket{User: "x", Skill: -1e9, Attributes: map[string]string{"map": "alone"}})
			clock.Add(time.Millisecond)
			a := submit(t, s, "duel", Ticket{User: "a", Skill: 12.5})
			clock.Add(time.Millisecond)
			b := submit(t, s, "duel", Ticket{User: "b", Skill: -3e8})
			waitFor(t, 5*time.Second, "a and b match (queue_pick.lua, match_form.lua)", func() bool { return matchOfTicket(t, s, "duel", a) != nil })
			m := matchOfTicket(t, s, "duel", a)
			assert.Equal(t, []string{a, b}, []string{m.Tickets[0].ID, m.Tickets[1].ID})

			ctx := context.Background()
			pa, err := s.Invite(ctx, "duel", Ticket{User: "p", Party: []string{"q"}, Skill: 1})
			require.NoError(t, err)
			st, err = s.Accept(ctx, "duel", pa.Ticket.ID, "Q")
			require.NoError(t, err, "party_accept.lua")
			assert.Equal(t, Waiting, st.State)
			_, err = s.Cancel(ctx, "duel", pa.Ticket.ID)
			require.NoError(t, err)
			pe, err := s.Invite(ctx, "duel", Ticket{User: "p", Party: []string{"r"}, Skill: 1})
			require.NoError(t, err)

			clock.Add(61 * time.Second)
			waitFor(t, 5*time.Second, "x expires, and the pending party (party_expire.lua)", func() bool {
				_, xs, _ := rec.snapshot()
				_, ok := xs[x]
				_, okp := xs[pe.Ticket.ID]
				return ok && okp
			})
		})
	}
}
