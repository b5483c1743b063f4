package rooms

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/internal/testkit"
)

// waitCalls returns how many WAIT commands the server at addr has run
// (INFO commandstats).
func waitCalls(t *testing.T, addr string) int {
	t.Helper()
	return int(redistest.CallsAt(t, addr, "wait"))
}

// scriptCalls returns how many EVALSHA and EVAL the server at addr has run.
func scriptCalls(t *testing.T, addr string) int {
	t.Helper()
	return int(redistest.CallsAt(t, addr, "evalsha", "eval"))
}

// replicaOfNode returns the process of the cluster that replicates master.
func replicaOfNode(t *testing.T, r *redistest.Redis, master *redistest.Server) *redistest.Server {
	t.Helper()
	info, err := master.Client(t).Info(context.Background(), "replication").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "slave0:") {
			continue
		}
		var ip, port string
		for _, kv := range strings.Split(strings.TrimPrefix(strings.TrimSpace(line), "slave0:"), ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "ip":
				ip = v
			case "port":
				port = v
			}
		}
		for _, s := range r.Nodes {
			if s.Addr == ip+":"+port {
				return s
			}
		}
	}
	t.Fatalf("no replica of %s among the cluster's nodes: %s", master.Addr, info)
	return nil
}

func TestDurabilityReplica(t *testing.T) {
	t.Parallel()
	r := redistest.Own(t, redistest.Options{})
	rep := redistest.StartReplica(t, r.Server)
	ctx := context.Background()
	mode := DurabilityReplica
	s := nodes(t, r, 1, Config{Durability: func() string { return mode }, DurabilityTimeout: 300 * time.Millisecond})[0]
	_, err := s.Seats.Join(ctx, "dur", "alice", ws1)
	require.NoError(t, err)
	_, err = s.say(ctx, "dur-1", "alice", "warm-up") // the script is loaded
	require.NoError(t, err)

	t.Run("a send is acked after one WAIT in its own pipeline", func(t *testing.T) {
		cnt := &counter{}
		s.Seats.rdb.AddHook(cnt)
		before := waitCalls(t, r.Server.Addr)
		res, err := s.Messages.Send(ctx, "dur-1", "alice", "safe", SendOptions{})
		require.NoError(t, err)
		assert.Equal(t, 1, waitCalls(t, r.Server.Addr)-before, "one WAIT")
		assert.EqualValues(t, 1, cnt.pipes.Load(), "in the send's pipeline: one round trip")
		assert.Zero(t, cnt.cmds.Load())
		raw := strings.TrimLeft(res.Message.ID[:13], "0") + "-" + strings.TrimLeft(res.Message.ID[14:], "0")
		if strings.HasSuffix(raw, "-") {
			raw += "0"
		}
		got, err := rep.Client(t).XRange(ctx, historyKey(s.Seats.ks, "dur", 1), raw, raw).Result()
		require.NoError(t, err)
		assert.Len(t, got, 1, "the replica holds the acked message %s at once", res.Message.ID)

		before = waitCalls(t, r.Server.Addr)
		out := s.Messages.SendMany(ctx, []SendRequest{{Room: "dur-1", User: "alice", Text: "a"}, {Room: "dur-1", User: "alice", Text: "b"}, {Room: "dur-1", User: "alice", Text: "c"}}, SendOptions{})
		for _, o := range out {
			require.NoError(t, o.Err)
		}
		assert.Equal(t, 1, waitCalls(t, r.Server.Addr)-before, "one WAIT behind the three scripts")
		assert.EqualValues(t, 2, cnt.pipes.Load())
	})

	t.Run("durability none sends no WAIT", func(t *testing.T) {
		mode = DurabilityNone
		defer func() { mode = DurabilityReplica }()
		before := waitCalls(t, r.Server.Addr)
		_, err := s.say(ctx, "dur-1", "alice", "fast")
		require.NoError(t, err)
		assert.Equal(t, before, waitCalls(t, r.Server.Addr))
	})

	t.Run("with the replica stopped a send is stored but answers ErrNotReplicated", func(t *testing.T) {
		rep.Pause(t)
		sent := testkit.Value(t, s.Seats.m.sent)
		start := time.Now()
		res, err := s.Messages.Send(ctx, "dur-1", "alice", "unsafe", SendOptions{})
		took := time.Since(start)
		require.ErrorIs(t, err, ErrNotReplicated)
		assert.GreaterOrEqual(t, took, 300*time.Millisecond, "WAIT waited its timeout")
		assert.Less(t, took, 5*time.Second, "and no longer than it, give or take a loaded machine")
		require.NotEmpty(t, res.Message.ID, "the result comes with the error")
		h, err := s.Messages.History(ctx, "dur-1", "", 1)
		require.NoError(t, err)
		require.Len(t, h, 1)
		assert.Equal(t, res.Message.ID, h[0].ID, "the message is stored")
		assert.Equal(t, sent+1, testkit.Value(t, s.Seats.m.sent), "and counted as sent")
		assert.Equal(t, 1.0, testkit.Value(t, s.Seats.m.notReplicated))

		out := s.Messages.SendMany(ctx, []SendRequest{{Room: "dur-1", User: "alice", Text: "x"}, {Room: "dur-1", User: "nobody", Text: "y"}}, SendOptions{})
		assert.ErrorIs(t, out[0].Err, ErrNotReplicated)
		assert.NotEmpty(t, out[0].Message.ID)
		assert.ErrorIs(t, out[1].Err, ErrNotSeated, "a refused say stays refused")

		rep.Resume(t)
		require.Eventually(t, func() bool {
			_, err := s.say(ctx, "dur-1", "alice", "again")
			return err == nil
		}, 10*time.Second, 50*time.Millisecond, "acked again once the replica is back")
	})

	t.Run("a keyed say's retry is acked on the terms of its first send", func(t *testing.T) {
		send := func() SendReply {
			return s.Messages.SendMany(ctx, []SendRequest{{Room: "dur-1", User: "alice", Text: "once", Key: "s1:c-1"}}, SendOptions{})[0]
		}
		sets := func() int { return int(redistest.CallsAt(t, r.Server.Addr, "set")) }
		rep.Pause(t)
		first := send()
		require.ErrorIs(t, first.Err, ErrNotReplicated)
		require.NotEmpty(t, first.Message.ID)

		before := sets()
		again := send()
		assert.ErrorIs(t, again.Err, ErrNotReplicated, "the replica does not hold the message yet: no ack")
		assert.True(t, again.Duplicate)
		assert.Equal(t, first.Message.ID, again.Message.ID, "the first message, not a second")
		assert.Equal(t, 1, sets()-before, "the replay rewrote its record, for the WAIT to cover")

		rep.Resume(t)
		require.Eventually(t, func() bool {
			r := send()
			return r.Err == nil && r.Duplicate && r.Message.ID == first.Message.ID
		}, 10*time.Second, 50*time.Millisecond, "acked as the first message once the replica holds it")
		h, err := s.Messages.History(ctx, "dur-1", "", MaxHistoryLimit)
		require.NoError(t, err)
		n := 0
		for _, m := range h {
			if m.Text == "once" {
				n++
			}
		}
		assert.Equal(t, 1, n, "stored once")

		mode = DurabilityNone
		defer func() { mode = DurabilityReplica }()
		before = sets()
		plain := send()
		require.NoError(t, plain.Err)
		assert.True(t, plain.Duplicate)
		assert.Equal(t, before, sets(), "without a WAIT a replay writes nothing")
	})

	t.Run("after NOSCRIPT the script is sent again behind a WAIT of its own", func(t *testing.T) {
		require.NoError(t, r.Client.ScriptFlush(ctx).Err())
		before := waitCalls(t, r.Server.Addr)
		_, err := s.say(ctx, "dur-1", "alice", "reloaded")
		require.NoError(t, err)
		assert.Equal(t, 2, waitCalls(t, r.Server.Addr)-before, "one WAIT per pipeline")
	})
}

func TestDurabilityReplicaWithoutReplica(t *testing.T) {
	t.Parallel()
	r := redistest.Real(t)
	ctx := context.Background()
	s := nodes(t, r, 1, Config{Durability: func() string { return DurabilityReplica }, DurabilityTimeout: 50 * time.Millisecond})[0]
	_, err := s.Seats.Join(ctx, "alone", "alice", ws1)
	require.NoError(t, err)
	_, err = s.say(ctx, "alone-1", "alice", "no replica to hold it")
	assert.ErrorIs(t, err, ErrNotReplicated)
}

// TestDurabilityReplicaOnCluster: the WAIT of a send goes to the master of
// the room's slot, the connection the send script went out on.
func TestDurabilityReplicaOnCluster(t *testing.T) {
	t.Parallel()
	r := redistest.OwnCluster(t, redistest.ClusterOptions{Replicas: 1})
	ctx := context.Background()
	s := nodes(t, r, 1, Config{Durability: func() string { return DurabilityReplica }, DurabilityTimeout: 300 * time.Millisecond})[0]
	// two lobbies whose rooms live on different masters
	lobbies := []string{"c0"}
	first := r.NodeOf(t, roomsKey(s.Seats.ks, "c0"))
	for i := 1; len(lobbies) < 2; i++ {
		l := "c" + strconv.Itoa(i)
		if r.NodeOf(t, roomsKey(s.Seats.ks, l)) != first {
			lobbies = append(lobbies, l)
		}
	}
	second := r.NodeOf(t, roomsKey(s.Seats.ks, lobbies[1]))
	for _, l := range lobbies {
		_, err := s.Seats.Join(ctx, l, "alice", ws1)
		require.NoError(t, err)
		_, err = s.say(ctx, l+"-1", "alice", "warm-up")
		require.NoError(t, err)
	}
	counts := func() map[string]int {
		m := map[string]int{}
		for _, n := range r.Nodes[:3] {
			m[n.Addr] = waitCalls(t, n.Addr)
		}
		return m
	}

	t.Run("each room's master gets the WAIT", func(t *testing.T) {
		for round := 0; round < 3; round++ {
			before := counts()
			out := s.Messages.SendMany(ctx, []SendRequest{{Room: lobbies[0] + "-1", User: "alice", Text: "a"}, {Room: lobbies[1] + "-1", User: "alice", Text: "b"}, {Room: lobbies[0] + "-1", User: "alice", Text: "c"}}, SendOptions{})
			for _, o := range out {
				require.NoError(t, o.Err)
			}
			after := counts()
			for addr := range after {
				want := 0
				if addr == first.Addr || addr == second.Addr {
					want = 1
				}
				assert.Equal(t, want, after[addr]-before[addr], "WAITs on %s (masters of the rooms: %s, %s)", addr, first.Addr, second.Addr)
			}
		}
	})

	t.Run("a stopped replica fails only its master's sends", func(t *testing.T) {
		rep := replicaOfNode(t, r, second)
		rep.Pause(t)
		out := s.Messages.SendMany(ctx, []SendRequest{{Room: lobbies[0] + "-1", User: "alice", Text: "kept"}, {Room: lobbies[1] + "-1", User: "alice", Text: "unsafe"}}, SendOptions{})
		assert.NoError(t, out[0].Err)
		assert.ErrorIs(t, out[1].Err, ErrNotReplicated)
		assert.NotEmpty(t, out[1].Message.ID)
		rep.Resume(t)
	})
}
