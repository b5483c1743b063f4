package ranking

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// Mode says how a posted score combines with the player's current one.
type Mode string

// The score modes. The empty Mode means Best.
const (
	Best Mode = "best" // keep the higher of the two (like ZADD GT)
	Incr Mode = "incr" // add to the current score; a new player starts from 0 (like ZINCRBY)
	Set  Mode = "set"  // replace the current score
)

// Limits of the read calls.
const (
	DefaultLimit  = 100  // the limit of Top and Range when the client gives none
	MaxLimit      = 1000 // the largest limit of Top and Range
	DefaultRadius = 10   // the radius of Around when the client gives none
	MaxRadius     = 500  // the largest radius of Around (2*500+1 entries)
	MaxBatch      = 1000 // the most players one Ranks call, or boards one GetMany call, may ask for
	DefaultGrace  = 24 * time.Hour
	// DefaultIdleTTL is how long a board that is neither periodic nor
	// permanent lives after its last post.
	DefaultIdleTTL = 30 * 24 * time.Hour
)

// Entry is a player's place on a board. Rank 0 is the best; of equal scores,
// the one reached first ranks higher.
type Entry struct {
	Player string `json:"player"`
	Score  Score  `json:"score"`
	Rank   int64  `json:"rank"`
}

// Config configures a Service. The zero value is ready to use.
type Config struct {
	// Prefix is the key namespace; empty means keyspace.DefaultPrefix.
	Prefix string
	// Now is the clock that picks the current period of "@daily" and
	// "@weekly" boards (UTC days and ISO weeks); nil means time.Now.
	Now func() time.Time
	// Grace is how long a period's keys outlive the period (for operators and
	// late jobs that read the finished board); zero means DefaultGrace (24h),
	// negative means none: the keys expire when the period ends.
	Grace time.Duration
	// IdleTTL is how long an all-time board (not "@daily" or "@weekly") that
	// is not Permanent lives after its last post: every post, changed or not,
	// sets it again on all of the board's keys, which then expire together.
	// Zero means DefaultIdleTTL (30 days); negative means never (every
	// all-time board is permanent).
	IdleTTL time.Duration
	// Permanent, when set, says which all-time boards never expire (the ones
	// an operator created, or named in settings); it is asked on every post.
	// A post to a board it names removes any TTL the board had. nil means
	// none is: every all-time board expires IdleTTL after its last post.
	Permanent func(board string) bool
	// Registerer receives the package's metrics; nil registers none.
	Registerer prometheus.Registerer
	// OnChange, when set, is called after every post that changed a board
	// (a new player, or a new score), with the board name as posted and the
	// player's new entry: the hook for marking pollers dirty. It runs on the
	// caller's goroutine before Post returns, so it must be quick.
	OnChange func(ctx context.Context, board string, e Entry)
}

// Service reads and writes leaderboards. It is safe for concurrent use and
// holds no board state of its own: every answer is read from Redis.
type Service struct {
	rdb      redis.UniversalClient
	sp       keyspace.Space
	now      func() time.Time
	grace    time.Duration
	idle     time.Duration
	perm     func(board string) bool
	onChange func(ctx context.Context, board string, e Entry)
	m        *metrics
}

// New returns a Service on rdb (a single server, a Cluster or the embedded
// server), with cfg's zero values replaced by their defaults.
func New(rdb redis.UniversalClient, cfg Config) *Service {
	s := &Service{
		rdb:      rdb,
		sp:       keyspace.New(cfg.Prefix),
		now:      cfg.Now,
		grace:    cfg.Grace,
		idle:     cfg.IdleTTL,
		perm:     cfg.Permanent,
		onChange: cfg.OnChange,
		m:        newMetrics(cfg.Registerer),
	}
	if s.now == nil {
		s.now = time.Now
	}
	switch {
	case s.grace == 0:
		s.grace = DefaultGrace
	case s.grace < 0:
		s.grace = 0
	}
	switch {
	case s.idle == 0:
		s.idle = DefaultIdleTTL
	case s.idle < 0:
		s.idle = 0
	}
	return s
}

// Post records score for player on board in mode (empty for Best) and returns
// the player's entry after it. A post that leaves the score as it was (a lower
// or equal best, an equal set, an incr by 0) changes nothing, not even the
// time that orders equal scores — but it does keep an idle board alive: the
// keys of an all-time board that is not Permanent expire Config.IdleTTL after
// its last post, all together, and a periodic board's at the end of its
// period plus Config.Grace.
//
// Errors: names.ErrBadName for a bad board or player name, ErrBadMode,
// ErrBadScore for a score outside the domain or an incr whose sum would leave
// it, ErrBoardFull; Redis errors wrapped.
func (s *Service) Post(ctx context.Context, board, player string, score Score, mode Mode) (Entry, error) {
	defer s.m.observe("post", time.Now())
	if mode == "" {
		mode = Best
	}
	if err := checkPost(board, player, score, mode); err != nil {
		s.m.post(mode, "refused")
		return Entry{}, fmt.Errorf("ranking: post to %s: %w", board, err)
	}
	p := s.period(board)
	hi, lo := splitScore(score)
	expire, idle := int64(0), int64(0)
	switch {
	case !p.expireAt.IsZero():
		expire = p.expireAt.Unix()
	case s.idle > 0 && (s.perm == nil || !s.perm(board)):
		idle = max(1, s.idle.Milliseconds())
	}
	res, err := postScript.Run(ctx, s.rdb,
		[]string{boardKey(s.sp, p.id), playersKey(s.sp, p.id), seqKey(s.sp, p.id)},
		player, string(mode), hi, lo, expire, idle).Slice()
	if err != nil {
		s.m.post(mode, "error")
		var rerr redis.Error
		if errors.As(err, &rerr) {
			switch msg := rerr.Error(); {
			case strings.HasPrefix(msg, "RANGE "):
				err = fmt.Errorf("%w: %s %s would leave -1e15..1e15", ErrBadScore, mode, score)
			case strings.HasPrefix(msg, "FULL "):
				err = ErrBoardFull
			}
		}
		return Entry{}, fmt.Errorf("ranking: post to %s for %s: %w", board, player, err)
	}
	e, changed, err := postResult(player, res)
	if err != nil {
		s.m.post(mode, "error")
		return Entry{}, fmt.Errorf("ranking: post to %s for %s: %w", board, player, err)
	}
	if !changed {
		s.m.post(mode, "unchanged")
		return e, nil
	}
	s.m.post(mode, "changed")
	if s.onChange != nil {
		s.onChange(ctx, board, e)
	}
	return e, nil
}

func checkPost(board, player string, score Score, mode Mode) error {
	if err := names.Board(board); err != nil {
		return err
	}
	if err := names.Player(player); err != nil {
		return err
	}
	switch mode {
	case Best, Incr, Set:
	default:
		return fmt.Errorf("%w: %q (want best, incr or set)", ErrBadMode, clip(string(mode)))
	}
	if !score.valid() {
		return fmt.Errorf("%w: %d thousandths is outside -1e15..1e15", ErrBadScore, int64(score))
	}
	return nil
}

func postResult(player string, res []any) (Entry, bool, error) {
	if len(res) != 3 {
		return Entry{}, false, fmt.Errorf("ranking: post script answered %d values", len(res))
	}
	prefix, _ := res[0].(string)
	rank, ok1 := res[1].(int64)
	changed, ok2 := res[2].(int64)
	if len(prefix) != prefixLen || !ok1 || !ok2 {
		return Entry{}, false, fmt.Errorf("ranking: post script answered %v", res)
	}
	sc, err := scoreOfRev(prefix[:revWidth])
	if err != nil {
		return Entry{}, false, err
	}
	return Entry{Player: player, Score: sc, Rank: rank}, changed == 1, nil
}

// Top returns the best limit entries of board (1..MaxLimit), best first.
//
// Errors: names.ErrBadName, ErrBadLimit; Redis errors wrapped.
func (s *Service) Top(ctx context.Context, board string, limit int) ([]Entry, error) {
	defer s.m.observe("top", time.Now())
	if err := names.Board(board); err != nil {
		return nil, fmt.Errorf("ranking: top of %s: %w", board, err)
	}
	if limit < 1 || limit > MaxLimit {
		return nil, fmt.Errorf("ranking: top of %s: %w: %d (want 1..%d)", board, ErrBadLimit, limit, MaxLimit)
	}
	p := s.period(board)
	members, err := s.rdb.ZRange(ctx, boardKey(s.sp, p.id), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("ranking: top of %s: %w", board, err)
	}
	return entries(members, 0)
}

// Get returns player's entry on board.
//
// Errors: names.ErrBadName, ErrUnknownPlayer when the player has no score
// there (in the current period of a periodic board); Redis errors wrapped.
func (s *Service) Get(ctx context.Context, board, player string) (Entry, error) {
	defer s.m.observe("get", time.Now())
	es, err := s.ranks(ctx, board, []string{player})
	if err != nil {
		return Entry{}, fmt.Errorf("ranking: %s on %s: %w", player, board, err)
	}
	if es[0].Rank < 0 {
		return Entry{}, fmt.Errorf("ranking: %s on %s: %w", player, board, ErrUnknownPlayer)
	}
	return es[0], nil
}

// Ranks returns the entries of players on board in the order asked, in one
// round trip and from one snapshot; a player with no score gets Rank -1 and
// Score 0. A player asked twice is answered twice.
//
// Errors: names.ErrBadName (for the board or any player), ErrBatchTooLarge
// beyond MaxBatch players; Redis errors wrapped.
func (s *Service) Ranks(ctx context.Context, board string, players []string) ([]Entry, error) {
	defer s.m.observe("ranks", time.Now())
	es, err := s.ranks(ctx, board, players)
	if err != nil {
		return nil, fmt.Errorf("ranking: ranks on %s: %w", board, err)
	}
	return es, nil
}

func (s *Service) ranks(ctx context.Context, board string, players []string) ([]Entry, error) {
	if err := names.Board(board); err != nil {
		return nil, err
	}
	if len(players) > MaxBatch {
		return nil, fmt.Errorf("%w: %d players (at most %d)", ErrBatchTooLarge, len(players), MaxBatch)
	}
	args := make([]any, len(players))
	for i, p := range players {
		if err := names.Player(p); err != nil {
			return nil, err
		}
		args[i] = p
	}
	out := make([]Entry, len(players))
	if len(players) == 0 {
		return out, nil
	}
	p := s.period(board)
	res, err := ranksScript.Run(ctx, s.rdb, []string{boardKey(s.sp, p.id), playersKey(s.sp, p.id)}, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 2*len(players) {
		return nil, fmt.Errorf("ranking: ranks script answered %d values for %d players", len(res), len(players))
	}
	for i, player := range players {
		if out[i], err = entryOf(player, res[2*i], res[2*i+1]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Around returns up to radius (0..MaxRadius) entries above player on board,
// the player's own, and up to radius below, best first, clipped at the ends.
//
// Errors: names.ErrBadName, ErrBadRadius, ErrUnknownPlayer; Redis errors wrapped.
func (s *Service) Around(ctx context.Context, board, player string, radius int) ([]Entry, error) {
	defer s.m.observe("around", time.Now())
	wrap := func(err error) error { return fmt.Errorf("ranking: around %s on %s: %w", player, board, err) }
	if err := names.Board(board); err != nil {
		return nil, wrap(err)
	}
	if err := names.Player(player); err != nil {
		return nil, wrap(err)
	}
	if radius < 0 || radius > MaxRadius {
		return nil, wrap(fmt.Errorf("%w: %d (want 0..%d)", ErrBadRadius, radius, MaxRadius))
	}
	p := s.period(board)
	res, err := aroundScript.Run(ctx, s.rdb, []string{boardKey(s.sp, p.id), playersKey(s.sp, p.id)}, player, radius).Slice()
	if err != nil {
		return nil, wrap(err)
	}
	if len(res) == 0 {
		return nil, wrap(ErrUnknownPlayer)
	}
	first, ok := res[0].(int64)
	members := make([]string, len(res)-1)
	for i, m := range res[1:] {
		members[i], _ = m.(string)
	}
	if !ok {
		return nil, wrap(fmt.Errorf("ranking: around script answered %v", res[0]))
	}
	es, err := entries(members, first)
	if err != nil {
		return nil, wrap(err)
	}
	return es, nil
}

// Range returns the entries of board whose score is within [min, max], both
// inclusive, best first, at most limit (1..MaxLimit) of them starting from the
// best. A nil bound is open; min above max gives no entries.
//
// Errors: names.ErrBadName, ErrBadLimit, ErrBadScore for a bound outside the
// score domain; Redis errors wrapped.
func (s *Service) Range(ctx context.Context, board string, min, max *Score, limit int) ([]Entry, error) {
	defer s.m.observe("range", time.Now())
	wrap := func(err error) error { return fmt.Errorf("ranking: range of %s: %w", board, err) }
	if err := names.Board(board); err != nil {
		return nil, wrap(err)
	}
	if limit < 1 || limit > MaxLimit {
		return nil, wrap(fmt.Errorf("%w: %d (want 1..%d)", ErrBadLimit, limit, MaxLimit))
	}
	// Best first means ascending rev: the lex range runs from max down to min.
	lo, hi := "-", "+"
	if max != nil {
		if !max.valid() {
			return nil, wrap(fmt.Errorf("%w: max %d thousandths", ErrBadScore, int64(*max)))
		}
		lo = "[" + revOf(*max) // members "rev(max):..." sort after the bare rev
	}
	if min != nil {
		if !min.valid() {
			return nil, wrap(fmt.Errorf("%w: min %d thousandths", ErrBadScore, int64(*min)))
		}
		hi = "(" + revOf(*min) + ";" // ';' follows ':': every "rev(min):..." member
	}
	if min != nil && max != nil && *min > *max {
		return []Entry{}, nil
	}
	p := s.period(board)
	key := boardKey(s.sp, p.id)
	var before *redis.IntCmd
	var members *redis.StringSliceCmd
	_, err := s.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		if lo != "-" {
			before = pipe.ZLexCount(ctx, key, "-", "("+lo[1:])
		}
		members = pipe.ZRangeByLex(ctx, key, &redis.ZRangeBy{Min: lo, Max: hi, Count: int64(limit)})
		return nil
	})
	if err != nil {
		return nil, wrap(err)
	}
	first := int64(0)
	if before != nil {
		first = before.Val()
	}
	es, err := entries(members.Val(), first)
	if err != nil {
		return nil, wrap(err)
	}
	return es, nil
}

// Len returns the number of players on board (in its current period).
//
// Errors: names.ErrBadName; Redis errors wrapped.
func (s *Service) Len(ctx context.Context, board string) (int64, error) {
	if err := names.Board(board); err != nil {
		return 0, fmt.Errorf("ranking: len of %s: %w", board, err)
	}
	n, err := s.rdb.ZCard(ctx, boardKey(s.sp, s.period(board).id)).Result()
	if err != nil {
		return 0, fmt.Errorf("ranking: len of %s: %w", board, err)
	}
	return n, nil
}

// entries decodes consecutive board members, the first at rank first.
func entries(members []string, first int64) ([]Entry, error) {
	out := make([]Entry, len(members))
	for i, m := range members {
		player, sc, err := decodeMember(m)
		if err != nil {
			return nil, err
		}
		out[i] = Entry{Player: player, Score: sc, Rank: first + int64(i)}
	}
	return out, nil
}

// period is the Redis unit a board name maps to now.
type period struct {
	id       string    // the {lb:id} unit
	expireAt time.Time // zero for an all-time board
}

// period maps a valid board name to its unit: the name itself for an
// all-time board, name@daily:YYYY-MM-DD (UTC day) or name@weekly:YYYY-Www
// (ISO week, Monday 00:00 UTC) for a periodic one, expiring Grace after the
// period ends.
func (s *Service) period(board string) period {
	now := s.now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	switch {
	case strings.HasSuffix(board, "@daily"):
		return period{id: board + ":" + day.Format(time.DateOnly), expireAt: day.AddDate(0, 0, 1).Add(s.grace)}
	case strings.HasSuffix(board, "@weekly"):
		year, week := now.ISOWeek()
		monday := day.AddDate(0, 0, -((int(now.Weekday()) + 6) % 7))
		id := board + ":" + strconv.Itoa(year) + "-W" + fmt.Sprintf("%02d", week)
		return period{id: id, expireAt: monday.AddDate(0, 0, 7).Add(s.grace)}
	}
	return period{id: board}
}

// IsBadInput reports whether err is the caller's fault (a 400): a bad name,
// score, mode, limit, radius or batch size.
func IsBadInput(err error) bool {
	for _, target := range []error{names.ErrBadName, ErrBadScore, ErrBadMode, ErrBadLimit, ErrBadRadius, ErrBatchTooLarge} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
