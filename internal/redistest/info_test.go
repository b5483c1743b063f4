package redistest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseCommandCalls(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_get:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|id:calls=1,usec=1,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_evalsha:calls=12345678901,usec=9,usec_per_call=0.00,rejected_calls=0,failed_calls=0\r\n"
	got, err := ParseCommandCalls(info)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"get": 3, "client|id": 1, "evalsha": 12345678901}, got)

	_, err = ParseCommandCalls("cmdstat_get:calls=x,usec=1\r\n")
	assert.Error(t, err, "a count that is not a number")
}

func TestCommandCallsAndReplica(t *testing.T) {
	t.Parallel()
	if !Available() {
		needReal(t, "redis-server is not on PATH")
	}
	master := StartServer(t, Options{})
	rep := StartReplica(t, master)
	ctx := context.Background()
	c := master.Client(t)
	before := master.CommandCalls(t, "set", "incr")
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, c.Incr(ctx, "n").Err())
	require.NoError(t, c.Incr(ctx, "n").Err())
	assert.EqualValues(t, 3, master.CommandCalls(t, "set", "incr")-before)
	n, err := c.Wait(ctx, 1, 5e9).Result()
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the replica acknowledges the writes")
	assert.Equal(t, "2", rep.Client(t).Get(ctx, "n").Val(), "the replica holds them")
}
