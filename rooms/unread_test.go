package rooms

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redistest"
	"github.com/chatd/chatd/names"
)

func TestUnread(t *testing.T) {
	t.Parallel()
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			t.Parallel()
			testUnread(t, srv.get(t))
		})
	}
}

func testUnread(t *testing.T, r *redistest.Redis) {
	ctx := context.Background()
	ss := nodes(t, r, 2, Config{HistoryMax: 5000, IdleTTL: time.Hour})
	room, err := ss[0].Seats.Join(ctx, "news", "alice", ws1)
	require.NoError(t, err)
	other, err := ss[0].Seats.Join(ctx, "sport", "alice", ws1) // another slot on a cluster
	require.NoError(t, err)
	var ids []string
	for range 5 {
		m, err := ss[0].say(ctx, room.ID, "alice", "hi")
		require.NoError(t, err)
		ids = append(ids, m.ID)
	}
	unread := func(rooms ...string) map[string]int {
		t.Helper()
		u, err := ss[1].ReadMarks.Unread(ctx, "bob", rooms)
		require.NoError(t, err)
		return u
	}

	t.Run("nothing read counts the whole history", func(t *testing.T) {
		assert.Equal(t, map[string]int{room.ID: 5, other.ID: 0}, unread(room.ID, other.ID))
	})

	t.Run("the last-read id never moves backwards", func(t *testing.T) {
		require.NoError(t, ss[0].ReadMarks.MarkRead(ctx, room.ID, "bob", ids[2]))
		assert.Equal(t, 2, unread(room.ID)[room.ID])
		require.NoError(t, ss[1].ReadMarks.MarkRead(ctx, room.ID, "bob", ids[0]))
		assert.Equal(t, 2, unread(room.ID)[room.ID], "an older id changes nothing")
		ms, sq, err := parseID(ids[3])
		require.NoError(t, err)
		raw := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(sq, 10) // as Redis writes it
		require.NotEqual(t, ids[3], raw)
		require.NoError(t, ss[1].ReadMarks.MarkRead(ctx, room.ID, "bob", raw))
		assert.Equal(t, 1, unread(room.ID)[room.ID], "the unpadded form is the same id")
		u, err := ss[1].ReadMarks.Unread(ctx, "carol", []string{room.ID})
		require.NoError(t, err)
		assert.Equal(t, 5, u[room.ID], "carol read nothing")
	})

	t.Run("an id past the newest message reads up to the newest only", func(t *testing.T) {
		require.NoError(t, ss[0].ReadMarks.MarkRead(ctx, room.ID, "bob", "9999999999999-999999"))
		assert.Equal(t, 0, unread(room.ID)[room.ID])
		m, err := ss[0].say(ctx, room.ID, "alice", "new")
		require.NoError(t, err)
		ids = append(ids, m.ID)
		assert.Equal(t, 1, unread(room.ID)[room.ID], "a message sent after is unread")
	})

	ks := keyspace.New(r.Prefix)
	lobby, seq, _ := ParseRoom(room.ID)
	t.Run("the last-read ids expire after the idle TTL, refreshed by each mark", func(t *testing.T) {
		ttl, err := r.Client.PTTL(ctx, readKey(ks, lobby, "bob")).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, 59*time.Minute)
		assert.LessOrEqual(t, ttl, time.Hour)
	})

	t.Run("a history trimmed past the last-read id counts what is left", func(t *testing.T) {
		require.NoError(t, ss[0].ReadMarks.MarkRead(ctx, room.ID, "dave", ids[1]))
		require.NoError(t, r.Client.XTrimMaxLen(ctx, historyKey(ks, lobby, seq), 2).Err())
		u, err := ss[1].ReadMarks.Unread(ctx, "dave", []string{room.ID})
		require.NoError(t, err)
		assert.Equal(t, 2, u[room.ID])
	})

	t.Run("counts are capped at 1,000", func(t *testing.T) {
		capped, err := ss[0].Seats.Join(ctx, "busy", "alice", ws1)
		require.NoError(t, err)
		// in pipelined batches: 1,005 round trips one by one can outlast
		// the seat's lease (no renewal here) on a loaded machine
		var first string
		for sent := 0; sent < UnreadMax+5; {
			reqs := make([]SendRequest, min(64, UnreadMax+5-sent))
			for i := range reqs {
				reqs[i] = SendRequest{Room: capped.ID, User: "alice", Text: "x"}
			}
			for _, r := range ss[0].Messages.SendMany(ctx, reqs, SendOptions{}) {
				require.NoError(t, r.Err)
				if sent == 0 {
					first = r.Message.ID
				}
				sent++
			}
		}
		assert.Equal(t, UnreadMax, unread(capped.ID)[capped.ID], "nothing read")
		require.NoError(t, ss[0].ReadMarks.MarkRead(ctx, capped.ID, "bob", first))
		assert.Equal(t, UnreadMax, unread(capped.ID)[capped.ID], "1,004 after the last read")
	})

	t.Run("unknown and malformed rooms, bad ids", func(t *testing.T) {
		assert.Equal(t, map[string]int{"nowhere-1": 0}, unread("nowhere-1"))
		assert.ErrorIs(t, ss[0].ReadMarks.MarkRead(ctx, "nowhere-1", "bob", ids[0]), ErrUnknownRoom)
		assert.ErrorIs(t, ss[0].ReadMarks.MarkRead(ctx, lobby+"-99", "bob", ids[0]), ErrUnknownRoom)
		assert.ErrorIs(t, ss[0].ReadMarks.MarkRead(ctx, room.ID, "bob", "yesterday"), ErrBadID)
		assert.ErrorIs(t, ss[0].ReadMarks.MarkRead(ctx, "no room", "bob", ids[0]), names.ErrBadName)
		assert.ErrorIs(t, ss[0].ReadMarks.MarkRead(ctx, room.ID, "b o b", ids[0]), names.ErrBadName)
		_, err := ss[0].ReadMarks.Unread(ctx, "bob", []string{room.ID, "no room"})
		assert.ErrorIs(t, err, names.ErrBadName)
		_, err = ss[0].ReadMarks.Unread(ctx, "", []string{room.ID})
		assert.ErrorIs(t, err, names.ErrBadName)
		u, err := ss[0].ReadMarks.Unread(ctx, "bob", nil)
		require.NoError(t, err)
		assert.Empty(t, u)
	})

	t.Run("many rooms are one pipelined round trip", func(t *testing.T) {
		cnt := &counter{}
		ss[1].Seats.rdb.AddHook(cnt)
		u := unread(room.ID, other.ID, "nowhere-1")
		assert.Len(t, u, 3)
		assert.EqualValues(t, 1, cnt.pipes.Load())
		assert.Zero(t, cnt.cmds.Load())
	})
}
