package rooms

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// BenchmarkSayInstructions counts the instructions redis-server runs for a
// say, with valgrind's callgrind, against a PUBLISH of the same event: the
// floor a bare hub pays. CPU time per say moves ±10 % between runs on a
// shared machine (the hub's own figure moved 49–70 µs between rooms50 runs
// of one binary); an instruction count does not move with the machine's
// load, so two builds of the send script compare to a fraction of a
// percent. It leaves out what the kernel does (the socket's system calls
// are the same for a say and a PUBLISH) and what cache misses cost.
//
// Each variant runs on a private redis-server under callgrind, counting
// only while its says are sent: 200 users seated in rooms of 50, keyed
// says round robin over them, each user's say bucket full again (expired)
// since the last, as in the rooms50 workload; claim records on and
// settled from the start, as in a deployment that never stored a message
// (FollowClaimRecords). "say/1" sends one say a script call (a quiet
// node), "say/4" four (a busy node's group commit carries several); their
// difference splits a say's cost into what each script call costs and
// what each say does. Run it alone, once:
//
//	go test -run '^$' -bench BenchmarkSayInstructions -benchtime 1x ./rooms/
//
// With CHATD_CALLGRIND_KEEP=<dir> each variant's dump is kept there
// (callgrind.say1.out, callgrind.say4.out, callgrind.say0.out for the
// PUBLISHes), for callgrind_annotate; a redis-server built with symbols
// first on PATH names Redis's own functions in it.
//
// The work is the same whatever b.N (valgrind runs Redis about 50 times
// slower); CI runs it once, as every benchmark.
func BenchmarkSayInstructions(b *testing.B) {
	if _, err := exec.LookPath("valgrind"); err != nil {
		if redistest.Strict() {
			b.Fatal("valgrind is not on PATH (CHATD_TEST_STRICT=1): apt-get install valgrind")
		}
		b.Skip("valgrind is not on PATH")
	}
	if _, err := exec.LookPath("callgrind_control"); err != nil {
		b.Fatal("callgrind_control is not on PATH (it comes with valgrind)")
	}
	const says = 400
	var perSay = map[string]float64{}
	for _, v := range []struct {
		name    string
		perCall int // 0: PUBLISH
	}{{"say/1", 1}, {"say/4", 4}, {"publish", 0}} {
		b.Run(v.name, func(b *testing.B) {
			ir := sayInstructions(b, says, v.perCall)
			perSay[v.name] = ir
			b.ReportMetric(ir, "instr/say")
		})
	}
	b.Run("split", func(b *testing.B) {
		if len(perSay) != 3 || perSay["publish"] <= 0 {
			b.Skip("a variant did not run")
		}
		// say/1 = call + say, say/4 = call/4 + say
		call := (perSay["say/1"] - perSay["say/4"]) * 4 / 3
		b.ReportMetric(call, "instr/call")
		b.ReportMetric(perSay["say/1"]-call, "instr/say-in-call")
		b.ReportMetric(perSay["say/1"]/perSay["publish"], "say/1÷publish")
		b.ReportMetric(perSay["say/4"]/perSay["publish"], "say/4÷publish")
	})
}

// sayInstructions returns the instructions redis-server ran per say (or
// per PUBLISH, perCall 0) for n of them.
func sayInstructions(b *testing.B, n, perCall int) float64 {
	r := redistest.Own(b, redistest.Options{Wrap: []string{"valgrind", "--tool=callgrind", "--instr-atstart=no",
		"--callgrind-out-file={dir}/callgrind.out"}})
	ctx := context.Background()
	s := nodes(b, r, 1, Config{})[0]
	require.NoError(b, s.Messages.FollowClaimRecords(ctx, true))
	require.Equal(b, "2", s.Messages.claimMode(time.Now()), "a new deployment: claim records settled")
	const users = 200
	roomOf := make([]string, users)
	for i := range users {
		room, err := s.Seats.Join(ctx, "instr", "u"+strconv.Itoa(i), ws1)
		require.NoError(b, err)
		roomOf[i] = room.ID
	}
	opt := SendOptions{Rate: 5, Burst: 5}
	for i := range users { // scripts loaded, histories made
		_, err := s.Messages.Send(ctx, roomOf[i], "u"+strconv.Itoa(i), "warm-up", opt)
		require.NoError(b, err)
	}
	ev := eventFor(roomOf[0])
	time.Sleep(time.Second) // every bucket full again: 1 token at 5/s, 200 ms
	text := strings.Repeat("x", 100)

	pid := r.Server.Pid()
	callgrind := func(args ...string) {
		out, err := exec.Command("callgrind_control", append(args, strconv.Itoa(pid))...).CombinedOutput()
		require.NoError(b, err, "callgrind_control %v: %s", args, out)
	}
	b.ResetTimer()
	callgrind("-i", "on")
	for k := 0; k < n; {
		if perCall == 0 {
			i := k % users
			require.NoError(b, r.Client.Publish(ctx, s.Messages.Channel(roomOf[i]), ev+text).Err())
			k++
			continue
		}
		var reqs []SendRequest
		for ; len(reqs) < perCall && k < n; k++ {
			i := k % users
			reqs = append(reqs, SendRequest{Room: roomOf[i], User: "u" + strconv.Itoa(i), Text: fmt.Sprintf("%d %s", k, text),
				Key: "s" + strconv.Itoa(i) + ":" + strconv.Itoa(k)})
		}
		for _, rep := range s.Messages.SendMany(ctx, reqs, opt) {
			require.NoError(b, rep.Err)
		}
	}
	callgrind("-i", "off")
	callgrind("-d")
	b.StopTimer()
	if keep := os.Getenv("CHATD_CALLGRIND_KEEP"); keep != "" {
		data, err := os.ReadFile(filepath.Join(r.Server.Dir(), "callgrind.out.1"))
		require.NoError(b, err)
		name := filepath.Join(keep, fmt.Sprintf("callgrind.say%d.out", perCall))
		require.NoError(b, os.WriteFile(name, data, 0o644))
		b.Logf("callgrind's dump: %s (callgrind_annotate --inclusive=yes %s)", name, name)
	}
	return float64(callgrindTotal(b, r.Server.Dir())) / float64(n)
}

// callgrindTotal reads the instruction total of callgrind's dump in dir
// (the file callgrind_control -d wrote: callgrind.out.1).
func callgrindTotal(b *testing.B, dir string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, "callgrind.out.1"))
	require.NoError(b, err)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "totals: "); ok {
			total, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			require.NoError(b, err)
			return total
		}
	}
	b.Fatalf("no totals in callgrind's dump: %.200s", data)
	return 0
}
