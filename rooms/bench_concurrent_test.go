package rooms

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkSendConcurrent is the rooms50 shape on Redis alone: 64
// goroutines (a node's connections, each with its say worker) each send
// one keyed say per call, as a user who says once every few seconds does,
// to 4 rooms of 50 seated users in one lobby, rate-limited, on a private
// redis-server. "say" sends through SendMany; "publish" is the floor a
// bare hub pays for the same say, one PUBLISH of a message event per call
// from each goroutine (no subscriber in either). Both report what a say
// costs Redis: cmds/say (INFO commandstats, inner commands included),
// evalsha/say (script calls) and redis-cpu-µs/say (INFO cpu, network I/O
// included). Run both with -count and read them side by side: they share
// the machine's load.
//
// The "serial-" pair is one goroutine: a quiet node, where every commit
// carries one say, so what a say costs is not shared with others.
//
// "say" keeps a keyed say's record in the lobby (claim records off: a
// rolling upgrade from v0.1.0); "say-records" in its claim, as a node does
// in its first 2 × IdempotencyTTL with claim records on; "say-settled"
// after that, a node's steady state (Messages.SetClaimRecords).
func BenchmarkSendConcurrent(b *testing.B) {
	for _, mode := range []string{"say", "say-records", "say-settled", "publish", "serial-say", "serial-say-settled", "serial-publish"} {
		b.Run(mode, func(b *testing.B) {
			records := ""
			if strings.Contains(mode, "say-") {
				records = strings.TrimPrefix(mode, "serial-")
			}
			benchSendConcurrent(b, strings.HasSuffix(mode, "publish"), strings.HasPrefix(mode, "serial"), records)
		})
	}
}

func benchSendConcurrent(b *testing.B, publish, serial bool, records string) {
	r := redistest.Own(b, redistest.Options{})
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	if records != "" {
		s.Messages.SetClaimRecords(true)
	}
	if records == "say-settled" {
		s.Messages.claimSince.Store(1) // on since 1970
	}
	var rooms []string
	for i := range 200 {
		got, err := s.Seats.Join(ctx, "bench", fmt.Sprintf("u%d", i), ws1)
		require.NoError(b, err)
		if i%50 == 0 {
			rooms = append(rooms, got.ID)
		}
	}
	opt := SendOptions{Rate: 1e6, Burst: 1e6} // the bucket is taken, never empty
	ev := eventFor(rooms[0])
	_, err := s.Messages.Send(ctx, rooms[0], "u0", "warm-up", opt) // scripts loaded, TTL set
	require.NoError(b, err)
	require.NoError(b, r.Client.Publish(ctx, "warm-up", "x").Err())
	require.NoError(b, r.Client.ConfigResetStat(ctx).Err())
	cpu0 := redisCPU(b, r.Client)
	var n, worker atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 cores
	if serial {
		b.SetParallelism(1)
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // RunParallel: 1 goroutine
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(worker.Add(1))
		for pb.Next() {
			i := int(n.Add(1))
			room := rooms[w%len(rooms)]
			user := fmt.Sprintf("u%d", (w%len(rooms))*50+w%50)
			text := fmt.Sprintf("hello, world %d", i)
			if publish {
				if err := r.Client.Publish(ctx, s.Messages.Channel(room), ev+text).Err(); err != nil {
					b.Error(err)
					return
				}
				continue
			}
			reps := s.Messages.SendMany(ctx, []SendRequest{{Room: room, User: user, Text: text, Key: fmt.Sprintf("s%d:r%d", w, i)}}, opt)
			if reps[0].Err != nil {
				b.Error(reps[0].Err)
				return
			}
		}
	})
	b.StopTimer()
	cpu := redisCPU(b, r.Client) - cpu0
	says := float64(n.Load())
	calls, evalsha := commandCallsQuiet(b, r)
	b.ReportMetric(calls/says, "cmds/say")
	b.ReportMetric(evalsha/says, "evalsha/say")
	b.ReportMetric(cpu*1e6/says, "redis-cpu-µs/say")
}

// commandCallsQuiet sums INFO commandstats calls (INFO and CONFIG left
// out) and returns the EVALSHA calls among them.
func commandCallsQuiet(tb testing.TB, r *redistest.Redis) (calls, evalsha float64) {
	stats := commandStats(tb, r.Client)
	return measuredCalls(stats), float64(stats["evalsha"])
}

// eventFor returns a message event of room with an empty text, for the
// publish floor's payload.
func eventFor(room string) string {
	return eventStart + "0000000000000-000000" + eventAfterID(Message{Room: room, From: "u0", Text: ""})
}
