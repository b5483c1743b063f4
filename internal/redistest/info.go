package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartReplica starts a new redis-server replicating master and waits
// until its link to master is up (it holds master's data), for tests of
// WAIT and of failovers. It is stopped when the test ends.
func StartReplica(tb testing.TB, master *Server) *Server {
	tb.Helper()
	host, port, _ := strings.Cut(master.Addr, ":")
	rep := StartServer(tb, Options{Args: []string{"--replicaof", host, port}})
	c := rep.Client(tb)
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return rep
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: replica %s of %s not in sync after 20 s: %v\n%s", rep.Addr, master.Addr, err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// CommandCalls returns how many times the server has run the commands
// named (lower case, as INFO commandstats spells them: "wait",
// "evalsha"), summed, since it started or its stats were reset; the
// commands of scripts count.
func (s *Server) CommandCalls(tb testing.TB, names ...string) int64 {
	tb.Helper()
	return CallsAt(tb, s.Addr, names...)
}

// CallsAt is CommandCalls of the server at addr.
func CallsAt(tb testing.TB, addr string, names ...string) int64 {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	return Calls(tb, c, names...)
}

// Calls is CommandCalls of the server c's INFO reaches (on a Cluster
// client, whichever node go-redis picks: give it a node's client).
func Calls(tb testing.TB, c redis.Cmdable, names ...string) int64 {
	tb.Helper()
	calls := CallsByCommand(tb, c)
	var n int64
	for _, name := range names {
		n += calls[name]
	}
	return n
}

// CallsByCommand reads INFO commandstats through c into calls by command
// (ParseCommandCalls).
func CallsByCommand(tb testing.TB, c redis.Cmdable) map[string]int64 {
	tb.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatalf("redistest: INFO commandstats: %v", err)
	}
	calls, err := ParseCommandCalls(info)
	if err != nil {
		tb.Fatalf("redistest: INFO commandstats: %v", err)
	}
	return calls
}

// ParseCommandCalls reads INFO commandstats' text into calls by command
// ("cmdstat_get:calls=3,usec=…" is "get": 3; a subcommand's line,
// "cmdstat_client|id", is "client|id").
func ParseCommandCalls(info string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, stats, ok := strings.Cut(rest, ":calls=")
		if !ok {
			continue
		}
		num, _, _ := strings.Cut(stats, ",")
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return nil, err
		}
		out[name] = n
	}
	return out, nil
}
