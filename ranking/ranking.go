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
	"github.com/chatd/chatd/internal/redisx"
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
	// IdempotencyTTL is how long the first answer to a post with an
	// idempotency key is kept.
	IdempotencyTTL = 10 * time.Minute
	// MaxIdempotencyKey is the longest idempotency key, in bytes.
	MaxIdempotencyKey = 128
)

// Entry is a player's place on a board. Rank 0 is the best; of equal scores,
// the one reached first ranks higher. Player is the name as it was last
// posted (players are one entry per canonical name).
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
	// MaxPlayers returns the most players one board (one period of a
	// periodic board) may hold, read on every post (wire it to the live
	// setting limit.players_per_board); nil, or a result <= 0, means no
	// cap. A post of a new player to a full board is refused with
	// ErrBoardFull; the players on it may still post. Lowering the cap
	// removes nobody.
	MaxPlayers func() int
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
	maxP     func() int
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
		maxP:     cfg.MaxPlayers,
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

// PostOptions are the optional parts of a post.
type PostOptions struct {
	// Key is the post's idempotency key ("" = none): 1–MaxIdempotencyKey
	// bytes of '!'..'~'. The first answer to a post with a key is kept
	// IdempotencyTTL in the board's slot, checked and recorded by the post
	// script itself, so a post sent twice — a client's retry, or the Redis
	// client's own retry after a read timeout — is applied once: the second
	// changes nothing and answers the first's entry (Duplicate). The same
	// key with another player, score or mode is ErrIdempotencyMismatch.
	// Keys are per board (per period of a periodic board) and per Scope.
	Key string
	// Scope is whose keys these are, so that two clients' keys never meet
	// (the web layer: the posting user); "" is one scope for the board. It
	// must be a valid user name.
	Scope string
	// IdleTTL, when positive and shorter than Config.IdleTTL, is how long
	// this post keeps an idle board alive at most: a board the post
	// creates lives IdleTTL, and an existing board keeps its expiry when
	// that is longer, so the post never shortens it. The web layer sets it
	// for a guest's post (24 h), so that a board only guests posted to
	// goes within a day. Periodic and Permanent boards ignore it.
	IdleTTL time.Duration
}

// PostResult is what a post did.
type PostResult struct {
	// Entry is the player's entry after the post (for a Duplicate, after
	// the first post with its key).
	Entry Entry
	// Changed is true when the post changed the board: a new player, a new
	// score, or the player's name shown in another case.
	Changed bool
	// Duplicate is true when the idempotency key had been used for this
	// very post: nothing was written, Entry is the first post's answer,
	// and Changed is the first post's. Config.OnChange is called again when
	// Changed: the duplicate may be the Redis client's retry of a call
	// whose first copy was applied and whose answer was lost.
	Duplicate bool
}

// Post records score for player on board in mode (empty for Best) and returns
// the player's entry after it: PostWith without options.
func (s *Service) Post(ctx context.Context, board, player string, score Score, mode Mode) (Entry, error) {
	res, err := s.PostWith(ctx, board, player, score, mode, PostOptions{})
	return res.Entry, err
}

// PostWith records score for player on board in mode (empty for Best) and
// returns the player's entry after it, in one script. The player is kept
// under its canonical name (names.Canonical: "Misc1" and "misc1" are one
// entry), shown by every read as it was last posted. A post that leaves the
// score as it was (a lower or equal best, an equal set, an incr by 0)
// changes nothing, not even the time that orders equal scores — but it does
// keep an idle board alive: the keys of an all-time board that is not
// Permanent expire Config.IdleTTL after its last post, all together, and a
// periodic board's at the end of its period plus Config.Grace. With
// opts.Key the post is idempotent (see PostOptions). Config.OnChange is
// called when the post changed the board, a Duplicate's first post
// included (see PostResult.Duplicate).
//
// Errors: names.ErrBadName for a bad board or player name, ErrBadMode,
// ErrBadScore for a score outside the domain or an incr whose sum would leave
// it, ErrBoardFull (a new player on a board at Config.MaxPlayers, or a
// board whose change counter ran out), ErrBadIdempotencyKey,
// ErrIdempotencyMismatch; Redis errors wrapped. After a Redis error the
// post may or may not have been applied: repeat it with the same key.
func (s *Service) PostWith(ctx context.Context, board, player string, score Score, mode Mode, opts PostOptions) (PostResult, error) {
	defer s.m.observe("post", time.Now())
	if mode == "" {
		mode = Best
	}
	if err := checkPost(board, player, score, mode, opts); err != nil {
		s.m.post(mode, "refused")
		return PostResult{}, fmt.Errorf("ranking: post to %s: %w", board, err)
	}
	canon := names.Canonical(player)
	p := s.period(board)
	hi, lo := splitScore(score)
	expire, idle := int64(0), int64(0)
	switch {
	case !p.expireAt.IsZero():
		expire = p.expireAt.Unix()
	case s.idle > 0 && (s.perm == nil || !s.perm(board)):
		idle = max(1, s.idle.Milliseconds())
	}
	lengthenOnly := "0"
	if idle > 0 && opts.IdleTTL > 0 && opts.IdleTTL < s.idle {
		idle, lengthenOnly = max(1, opts.IdleTTL.Milliseconds()), "1"
	}
	maxPlayers := 0
	if s.maxP != nil {
		maxPlayers = max(0, s.maxP())
	}
	keys := []string{boardKey(s.sp, p.id), playersKey(s.sp, p.id), seqKey(s.sp, p.id)}
	args := []any{canon, player, string(mode), hi, lo, expire, idle, maxPlayers}
	// A post without a key is keyed by this call, for
	// redisx.CallRecordTTL: the Redis
	// client's own retry after a read timeout (the first copy may have run)
	// is then answered by the first copy's record, not applied twice. A new
	// call is a new post; a caller that retries must send its own key. The
	// call ends within redisx.CallBound, so that no retry is sent after
	// the key may have gone.
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	key, scope, ttl := opts.Key, opts.Scope, IdempotencyTTL
	if key == "" {
		// "~" and a random id: a client's key never starts with "~" in the
		// board-wide scope it goes to
		key, scope, ttl = "~"+redisx.CallID(), "", redisx.CallRecordTTL
	}
	keys = append(keys, idemKey(s.sp, p.id, scope, key))
	args = append(args, fmt.Sprintf("%s\n%s\n%s\n%d\n%d", board, canon, mode, hi, lo), ttl.Milliseconds(), lengthenOnly)
	res, err := postScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		var rerr redis.Error
		result := "error"
		if errors.As(err, &rerr) {
			switch msg := rerr.Error(); {
			case strings.HasPrefix(msg, "RANGE "):
				err, result = fmt.Errorf("%w: %s %s would leave -1e15..1e15", ErrBadScore, mode, score), "refused"
			case strings.HasPrefix(msg, "FULL "):
				err, result = fmt.Errorf("%w: its sequence of 10^15 score changes is exhausted", ErrBoardFull), "refused"
			case strings.HasPrefix(msg, "PLAYERS "):
				err, result = fmt.Errorf("%w: board %s holds its cap of %s players; the players on it may still post", ErrBoardFull, board, strings.TrimPrefix(msg, "PLAYERS ")), "refused"
			case strings.HasPrefix(msg, "MISMATCH "):
				err, result = fmt.Errorf("%w: key %q", ErrIdempotencyMismatch, clip(opts.Key)), "refused"
			}
		}
		s.m.post(mode, result)
		return PostResult{}, fmt.Errorf("ranking: post to %s for %s: %w", board, player, err)
	}
	out, err := postResult(res)
	if err != nil {
		s.m.post(mode, "error")
		return PostResult{}, fmt.Errorf("ranking: post to %s for %s: %w", board, player, err)
	}
	switch {
	case out.Duplicate:
		s.m.post(mode, "duplicate")
	case !out.Changed:
		s.m.post(mode, "unchanged")
	default:
		s.m.post(mode, "changed")
	}
	// A duplicate that changed the board is marked again: it may be the
	// Redis client's retry of this very call, whose first copy changed the
	// board and whose answer was lost, and then nobody marked it.
	if out.Changed && s.onChange != nil {
		s.onChange(ctx, board, out.Entry)
	}
	return out, nil
}

func checkPost(board, player string, score Score, mode Mode, opts PostOptions) error {
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
	if opts.Key == "" {
		if opts.Scope != "" {
			return fmt.Errorf("%w: a scope without a key", ErrBadIdempotencyKey)
		}
		return nil
	}
	if len(opts.Key) > MaxIdempotencyKey {
		return fmt.Errorf("%w: longer than %d bytes", ErrBadIdempotencyKey, MaxIdempotencyKey)
	}
	for i := 0; i < len(opts.Key); i++ {
		if c := opts.Key[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: it holds byte %#x (want '!' to '~')", ErrBadIdempotencyKey, c)
		}
	}
	if opts.Scope != "" && names.User(opts.Scope) != nil {
		return fmt.Errorf("%w: scope %q is not a user name", ErrBadIdempotencyKey, clip(opts.Scope))
	}
	return nil
}

// postResult reads the post script's {member, rank, changed, duplicate}.
func postResult(res []any) (PostResult, error) {
	if len(res) != 4 {
		return PostResult{}, fmt.Errorf("ranking: post script answered %d values", len(res))
	}
	member, _ := res[0].(string)
	rank, ok1 := res[1].(int64)
	changed, ok2 := res[2].(int64)
	dup, ok3 := res[3].(int64)
	if !ok1 || !ok2 || !ok3 {
		return PostResult{}, fmt.Errorf("ranking: post script answered %v", res)
	}
	player, sc, err := decodeMember(member)
	if err != nil {
		return PostResult{}, err
	}
	return PostResult{Entry: Entry{Player: player, Score: sc, Rank: rank}, Changed: changed == 1, Duplicate: dup == 1}, nil
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
		args[i] = names.Canonical(p)
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
	res, err := aroundScript.Run(ctx, s.rdb, []string{boardKey(s.sp, p.id), playersKey(s.sp, p.id)}, names.Canonical(player), radius).Slice()
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
// score, mode, limit, radius, batch size or idempotency key.
func IsBadInput(err error) bool {
	for _, target := range []error{names.ErrBadName, ErrBadScore, ErrBadMode, ErrBadLimit, ErrBadRadius, ErrBatchTooLarge,
		ErrBadIdempotencyKey, ErrIdempotencyMismatch} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
