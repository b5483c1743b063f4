package ranking

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chatd/chatd/internal/redistest"
)

// clock is a settable clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func TestPeriodicBoards(t *testing.T) {
	t.Parallel()
	r := redistest.New(t) // the embedded server too: it is chatd's default
	ctx := context.Background()
	// Periods near the real time, so that EXPIREAT lands in the future on the
	// real server: the end of today (UTC) and the end of this ISO week.
	now := time.Now().UTC()
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	clk := &clock{}
	s := newService(t, r, Config{Now: clk.Now, Grace: time.Hour})

	ttl := func(t *testing.T, key string) time.Duration {
		t.Helper()
		d, err := r.Client.TTL(ctx, key).Result()
		require.NoError(t, err)
		return d
	}
	// assertExpiresAt checks a key's TTL against an absolute deadline, with
	// slack for the seconds the test itself takes.
	assertExpiresAt := func(t *testing.T, key string, at time.Time) {
		t.Helper()
		want := time.Until(at)
		got := ttl(t, key)
		assert.InDelta(t, want.Seconds(), got.Seconds(), 5, "TTL of %s", key)
	}

	t.Run("a daily board rolls over at UTC midnight", func(t *testing.T) {
		clk.Set(today.Add(24*time.Hour - time.Millisecond)) // 23:59:59.999
		post(t, s, "clicks@daily", "a", "5", Incr)
		post(t, s, "clicks@daily", "b", "1", Incr)
		clk.Set(today.Add(24 * time.Hour)) // 00:00 next day
		top, err := s.Top(ctx, "clicks@daily", 10)
		require.NoError(t, err)
		assert.Empty(t, top, "the new day starts empty")
		e := post(t, s, "clicks@daily", "b", "1", Incr)
		assert.Equal(t, Entry{"b", sc(t, "1"), 0}, e, "incr starts from 0 in the new period")

		day1 := "clicks@daily:" + today.Format(time.DateOnly)
		day2 := "clicks@daily:" + today.AddDate(0, 0, 1).Format(time.DateOnly)
		assert.Equal(t, []string{"a:5", "b:1"}, raw(t, r, s, day1))
		assert.Equal(t, []string{"b:1"}, raw(t, r, s, day2))
		for _, key := range []string{boardKey(s.sp, day1), playersKey(s.sp, day1), seqKey(s.sp, day1)} {
			assertExpiresAt(t, key, today.AddDate(0, 0, 1).Add(time.Hour))
		}
		for _, key := range []string{boardKey(s.sp, day2), playersKey(s.sp, day2), seqKey(s.sp, day2)} {
			assertExpiresAt(t, key, today.AddDate(0, 0, 2).Add(time.Hour))
		}
	})
	t.Run("a weekly board rolls over on Monday 00:00 UTC", func(t *testing.T) {
		monday := today.AddDate(0, 0, -((int(today.Weekday()) + 6) % 7))
		nextMonday := monday.AddDate(0, 0, 7)
		clk.Set(nextMonday.Add(-time.Nanosecond)) // Sunday 23:59:59.999999999
		post(t, s, "kills@weekly", "a", "7", Best)
		clk.Set(nextMonday)
		post(t, s, "kills@weekly", "c", "3", Best)
		y1, w1 := monday.ISOWeek()
		y2, w2 := nextMonday.ISOWeek()
		week1 := fmt.Sprintf("kills@weekly:%d-W%02d", y1, w1)
		week2 := fmt.Sprintf("kills@weekly:%d-W%02d", y2, w2)
		assert.Equal(t, []string{"a:7"}, raw(t, r, s, week1))
		assert.Equal(t, []string{"c:3"}, raw(t, r, s, week2))
		assertExpiresAt(t, boardKey(s.sp, week1), nextMonday.Add(time.Hour))
		assertExpiresAt(t, seqKey(s.sp, week2), nextMonday.AddDate(0, 0, 7).Add(time.Hour))
		top, err := s.Top(ctx, "kills@weekly", 10)
		require.NoError(t, err)
		assert.Equal(t, []string{"c"}, players(top))
	})
	t.Run("an all-time board expires IdleTTL after its last post", func(t *testing.T) {
		post(t, s, "clicks", "a", "1", Best)
		for _, key := range []string{boardKey(s.sp, "clicks"), playersKey(s.sp, "clicks"), seqKey(s.sp, "clicks")} {
			assert.InDelta(t, DefaultIdleTTL.Seconds(), ttl(t, key).Seconds(), 5, key)
		}
	})
	t.Run("a periodic board keeps its period's expiry, not the idle one", func(t *testing.T) {
		clk.Set(today.Add(time.Hour))
		post(t, s, "laps@daily", "a", "1", Best)
		post(t, s, "laps@daily", "a", "0", Best) // unchanged: no expiry written
		id := "laps@daily:" + today.Format(time.DateOnly)
		for _, key := range []string{boardKey(s.sp, id), playersKey(s.sp, id), seqKey(s.sp, id)} {
			assertExpiresAt(t, key, today.AddDate(0, 0, 1).Add(time.Hour))
		}
	})
	t.Run("a period whose grace has passed is gone", func(t *testing.T) {
		clk.Set(today.AddDate(0, 0, -3))
		e := post(t, s, "old@daily", "a", "1", Best)
		assert.Equal(t, int64(0), e.Rank)
		top, err := s.Top(ctx, "old@daily", 10)
		require.NoError(t, err)
		assert.Empty(t, top, "EXPIREAT in the past deletes the keys at once")
	})
}

// raw lists a unit's board as player:score, read from Redis directly.
func raw(t *testing.T, r *redistest.Redis, s *Service, id string) []string {
	t.Helper()
	members, err := r.Client.ZRange(context.Background(), boardKey(s.sp, id), 0, -1).Result()
	require.NoError(t, err)
	out := []string{}
	for _, m := range members {
		p, score, err := decodeMember(m)
		require.NoError(t, err)
		out = append(out, p+":"+score.String())
	}
	return out
}
