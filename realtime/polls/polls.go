package polls

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/matchmaking"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
	"github.com/chatd/chatd/shop"
)

// pollTracker is what the poll use case needs of the dirty tracker.
type pollTracker interface {
	Open(ctx context.Context, session, user string) (created bool, err error)
	Cursors(ctx context.Context, session string) (map[string]string, error)
	SetCursor(ctx context.Context, session string, cur map[string]string) error
	MarkSessions(ctx context.Context, sessions []string, bits dirty.Mask) error
	Take(ctx context.Context, session string) (dirty.Mask, error)
	Wait(ctx context.Context, session string, max time.Duration) (dirty.Mask, error)
	Following(ctx context.Context, user string) ([]string, error)
}

// pollRooms is what a poll reads of the seats.
type pollRooms interface {
	RoomMany(ctx context.Context, ids []string) ([]rooms.Room, error)
}

// pollHistory is what a poll reads of the messages.
type pollHistory interface {
	History(ctx context.Context, roomID, after string, limit int) ([]rooms.Message, error)
}

// pollSettings is what a poll reads of the live settings.
type pollSettings interface {
	Reload(ctx context.Context) error
	Values() (version int64, values map[string]any)
}

type pollWallets interface {
	Wallet(ctx context.Context, user string) (shop.Wallet, error)
}

type pollBoards interface {
	GetMany(ctx context.Context, boards []string, player string) (map[string]ranking.Entry, error)
}

var (
	_ pollTracker  = (*dirty.Tracker)(nil)
	_ pollRooms    = (*rooms.Seats)(nil)
	_ pollHistory  = (*rooms.Messages)(nil)
	_ pollSettings = (*settings.Store)(nil)
	_ pollWallets  = (*shop.Shop)(nil)
	_ pollBoards   = (*ranking.Service)(nil)
)

// Polls is the REST poll use case: a clean poll costs one Redis round
// trip (dirty's take script, whose GETDEL clears the session's mask); a
// dirty one reads each dirty section's
// fresh state; a long poll parks until a mark wakes it. A poll renews the
// session's seats and presence (at most once per third of the lease).
type Polls struct {
	sessions sessionKeeper
	dirty    pollTracker
	rooms    pollRooms
	history  pollHistory
	settings pollSettings
	wallets  pollWallets
	boards   pollBoards
	notices  noticeTaker
	match    matchEvents
	gaps     gapCounter
	blocks   realtime.BlockLister
	now      func() time.Time
	log      *slog.Logger
	draining <-chan struct{}

	mu     sync.Mutex
	parked map[string]int // session → long polls parked on this node
}

// matchEvents are a user's matchmaking events (package match).
type matchEvents interface {
	Events(ctx context.Context, user string) ([]matchmaking.Event, error)
}

// sessionKeeper keeps a polling REST session's seats and presence
// (chat.REST.RenewPoll: at most once per third of the seat lease).
type sessionKeeper interface {
	RenewPoll(ctx context.Context, p realtime.Principal)
}

// noticeTaker is the poll's notices section (realtime.Notices).
type noticeTaker interface {
	TakeUnseen(ctx context.Context, p realtime.Principal) ([]realtime.PollNotice, error)
}

// gapCounter counts a gap told and not filled (realtime.Hub).
type gapCounter interface{ GapUnfilled() }

var (
	_ noticeTaker = (*realtime.Notices)(nil)
	_ gapCounter  = (*realtime.Hub)(nil)
)

// Config is what the poll is built from. Every field but Now and Logger
// is required.
type Config struct {
	// Sessions keeps a polling session's seats (chat.REST).
	Sessions sessionKeeper
	// Dirty is the dirty tracker (package dirty).
	Dirty pollTracker
	// Rooms and History are the rooms' seats and messages.
	Rooms   pollRooms
	History pollHistory
	// Settings, Wallets and Boards are the live settings, the shop and the
	// leaderboards.
	Settings pollSettings
	Wallets  pollWallets
	Boards   pollBoards
	// Notices is the core's notice delivery.
	Notices noticeTaker
	// Match is the matchmaking use case's events (package match).
	Match matchEvents
	// Gaps counts the gaps a poll tells (the core's Hub).
	Gaps gapCounter
	// Blocks reads the users a user blocks (package direct), whose
	// messages the messages section leaves out for that user; nil = none
	// left out.
	Blocks realtime.BlockLister
	// Draining is closed when the node drains: a parked poll answers.
	Draining <-chan struct{}
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
}

// New builds the REST poll.
func New(cfg Config) *Polls {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Polls{sessions: cfg.Sessions, dirty: cfg.Dirty, rooms: cfg.Rooms, history: cfg.History, settings: cfg.Settings,
		wallets: cfg.Wallets, boards: cfg.Boards, notices: cfg.Notices, match: cfg.Match, gaps: cfg.Gaps,
		blocks: cfg.Blocks, now: cfg.Now, log: cfg.Logger, draining: cfg.Draining}
}

// PollResult is the answer to a poll: the sections dirty since the
// session's last poll, each with its fresh data.
type PollResult struct {
	Dirty []string       `json:"dirty"`
	Data  map[string]any `json:"data"`
	// More (absent when false) is true when messages were left out to keep the answer within
	// MaxPollMessageBytes: the section stays dirty, so the next poll (at
	// once, with no wait) returns them.
	More bool `json:"more,omitempty"`
	// Gaps (absent when empty) names the rooms whose messages since the
	// session's last poll are not all in the answer because the history no
	// longer holds them (trimmed past the session's cursor, or Redis lost
	// the stream): the room's messages are the ones left, and the ones
	// between are gone — a poll's resume_gap. Each gap is told once.
	Gaps []string `json:"gaps,omitempty"`
}

// MaxPollsPerSession bounds the long polls one session may have parked on
// one node; one more is refused (rate_limited) rather than held.
const MaxPollsPerSession = 2

// MaxPollWait is the longest a long poll waits.
const MaxPollWait = dirty.MaxWait

// Poll answers p's poll. With wait > 0 it parks until a mark wakes it, at
// most wait (which must be at most MaxPollWait: the transport refuses more);
// a draining node answers at once.
func (ps *Polls) Poll(ctx context.Context, p realtime.Principal, wait time.Duration) (PollResult, error) {
	wait = min(wait, MaxPollWait)
	if _, err := ps.dirty.Open(ctx, p.Session, p.User); err != nil {
		return PollResult{}, err
	}
	ps.sessions.RenewPoll(ctx, p)
	var mask dirty.Mask
	var err error
	if wait > 0 {
		if !ps.park(p.Session) {
			return PollResult{}, realtime.ErrTooManyPolls
		}
		defer ps.unpark(p.Session)
		wctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-ps.draining:
				cancel()
			case <-wctx.Done():
			}
		}()
		mask, err = ps.dirty.Wait(wctx, p.Session, wait)
		cancel()
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			mask, err = ps.dirty.Take(ctx, p.Session)
		}
	} else {
		mask, err = ps.dirty.Take(ctx, p.Session)
	}
	if err != nil {
		return PollResult{}, err
	}
	res := PollResult{Dirty: mask.Sections(), Data: map[string]any{}}
	if res.Dirty == nil {
		res.Dirty = []string{}
	}
	if mask != 0 {
		if err := ps.data(ctx, p, mask, &res); err != nil {
			// put the bits back so the next poll retries them
			_ = ps.dirty.MarkSessions(context.WithoutCancel(ctx), []string{p.Session}, mask)
			return PollResult{}, err
		}
		if res.More {
			// messages are left over MaxPollMessageBytes: the next poll reads them
			if err := ps.dirty.MarkSessions(ctx, []string{p.Session}, dirty.Of(dirty.Messages)); err != nil {
				return PollResult{}, err
			}
		}
	}
	return res, nil
}

func (ps *Polls) park(session string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.parked == nil {
		ps.parked = map[string]int{}
	}
	if ps.parked[session] >= MaxPollsPerSession {
		return false
	}
	ps.parked[session]++
	return true
}

func (ps *Polls) unpark(session string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.parked[session]--; ps.parked[session] <= 0 {
		delete(ps.parked, session)
	}
}

// data fills res's data with the fresh state of each dirty section.
func (ps *Polls) data(ctx context.Context, p realtime.Principal, mask dirty.Mask, res *PollResult) error {
	data := res.Data
	var cur map[string]string
	var err error
	if mask.Has(dirty.Rooms) || mask.Has(dirty.Messages) {
		if cur, err = ps.dirty.Cursors(ctx, p.Session); err != nil {
			return err
		}
	}
	if mask.Has(dirty.Rooms) {
		ids := make([]string, 0, len(cur))
		for room := range cur {
			ids = append(ids, room)
		}
		sort.Strings(ids)
		list, err := ps.rooms.RoomMany(ctx, ids) // one round trip for all
		if err != nil {
			return err
		}
		if list == nil {
			list = []rooms.Room{}
		}
		data["rooms"] = list
	}
	if mask.Has(dirty.Messages) {
		if res.More, res.Gaps, err = ps.messages(ctx, p, cur, data); err != nil {
			return err
		}
	}
	if mask.Has(dirty.Settings) {
		// The mark may come from the node that took the write before this
		// node's copy heard of it over pub/sub: read the snapshot, so the
		// bit is never spent on a stale answer.
		if err := ps.settings.Reload(ctx); err != nil {
			return err
		}
		v, vals := ps.settings.Values()
		data["settings"] = map[string]any{"version": v, "values": vals}
	}
	if mask.Has(dirty.Wallet) {
		w, err := ps.wallets.Wallet(ctx, p.User)
		if err != nil {
			return err
		}
		data["wallet"] = w
	}
	if mask.Has(dirty.Leaderboards) {
		entries, err := ps.followedBoards(ctx, p.User)
		if err != nil {
			return err
		}
		data["leaderboards"] = entries
	}
	if mask.Has(dirty.Match) {
		evs, err := ps.match.Events(ctx, p.User)
		if err != nil {
			return err
		}
		data["match"] = evs
	}
	if mask.Has(dirty.Notices) {
		list, err := ps.notices.TakeUnseen(ctx, p)
		if err != nil {
			return err
		}
		data["notices"] = list
	}
	return nil
}

// messages reads each room's messages after the session's cursor, with the
// core's one catch-up rule (readFrom), and moves the cursors. The rooms are
// read in name order within MaxPollMessageBytes of JSON for all of them:
// once it is spent, the rest of the rooms are not read, a room is cut at
// the last message that fits, the Messages bit is marked again and the
// answer says "more" (the next poll goes on from the moved cursors). A
// room whose cursor the history no longer holds is named in gaps, logged
// and counted, and its cursor moves past the gap. Messages of users p's
// user blocks are left out, and the cursors move past them all the same.
func (ps *Polls) messages(ctx context.Context, p realtime.Principal, cur map[string]string, data map[string]any) (more bool, gaps []string, err error) {
	var bl *realtime.Blocks
	if ps.blocks != nil && len(cur) > 0 {
		list, err := ps.blocks.Blocks(ctx, p.User)
		if err != nil {
			return false, nil, err
		}
		bl = realtime.NewBlocks(list)
	}
	out := map[string][]rooms.Message{}
	next := map[string]string{}
	ids := make([]string, 0, len(cur))
	for room := range cur {
		ids = append(ids, room)
	}
	sort.Strings(ids)
	budget := realtime.MaxPollMessageBytes
	for _, room := range ids {
		if budget <= 0 {
			more = true
			break
		}
		after := cur[room]
		// "0": the room had no message when the session entered, so
		// everything in it now is new to the session.
		if after == "0" {
			after = ""
		}
		read := func(ctx context.Context, after string, limit int) ([]rooms.Message, error) {
			return ps.history.History(ctx, room, after, limit)
		}
		msgs, gap, err := readWithin(ctx, read, after, budget)
		if errors.Is(err, rooms.ErrUnknownRoom) {
			continue
		}
		if err != nil {
			return false, nil, err
		}
		fit, size, cut := realtime.FitMessages(msgs, budget)
		if len(out) > 0 && size > budget {
			// not even one message fits in what is left: next poll
			more = true
			break
		}
		budget -= size
		if cut {
			more = true
			budget = 0
		}
		if len(msgs) >= rooms.MaxHistoryLimit {
			more = true // the read stopped at its count, not at the room's end
		}
		if len(fit) > 0 {
			if shown := bl.Messages(fit); len(shown) > 0 {
				out[room] = shown
			}
			next[room] = fit[len(fit)-1].ID
		}
		if gap {
			gaps = append(gaps, room)
			if len(fit) == 0 {
				next[room] = "0" // nothing is left: everything from now on is new
			}
		}
	}
	if len(next) > 0 {
		if err := ps.dirty.SetCursor(ctx, p.Session, next); err != nil {
			return false, nil, err
		}
	}
	for _, room := range gaps {
		ps.gaps.GapUnfilled()
		ps.log.Warn("poll could not read after the session's cursor: told in gaps", "room", room, "user", p.User, "after", cur[room])
	}
	data["messages"] = out
	return more, gaps, nil
}

// PollPage is how many messages one read of a poll takes from Redis: a
// poll reads a room page by page and stops once its byte budget is
// reached, so what it reads past the budget is at most one page.
const PollPage = 32

// readWithin reads the messages after the message id after ("" = from the
// room's first) page by page, PollPage at a time, until it has more than
// budget bytes of JSON, the room has no more, or rooms.MaxHistoryLimit
// are read: Redis is asked for what the budget can hold and one page
// more, not for the room's whole history. When a page's start is no
// longer in the history, it reads from the room's first message and keeps
// only what comes after: the poll's one catch-up rule, as readFrom's for
// the Feed. gap reports that the history was trimmed past after (its
// oldest message is later than after, or none is left): messages may have
// been missed. A cursor's message removed by an admin, with older ones
// still there, is no gap.
func readWithin(ctx context.Context, read realtime.ReadFunc, after string, budget int) (msgs []rooms.Message, gap bool, err error) {
	cursor, skip, size := after, "", 0
	if cursor == "" {
		cursor = realtime.StreamStart
	}
	for len(msgs) < rooms.MaxHistoryLimit {
		page, err := read(ctx, cursor, PollPage)
		if errors.Is(err, rooms.ErrResumeGap) && cursor != realtime.StreamStart {
			skip, cursor = max(skip, cursor), realtime.StreamStart
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if cursor == realtime.StreamStart && skip != "" && (len(page) == 0 || page[0].ID > skip) {
			gap = true
		}
		for _, m := range page {
			if m.ID <= skip {
				continue
			}
			msgs = append(msgs, m)
			size += realtime.MessageSize(m) + 1
		}
		if len(page) < PollPage || size > budget {
			break
		}
		cursor = page[len(page)-1].ID
	}
	return msgs, gap, nil
}

// followedBoards returns user's entry on each board the user follows, one
// pipeline per ranking.MaxBatch boards.
func (ps *Polls) followedBoards(ctx context.Context, user string) (map[string]ranking.Entry, error) {
	topics, err := ps.dirty.Following(ctx, user)
	if err != nil {
		return nil, err
	}
	var boards []string
	for _, t := range topics {
		if board, ok := realtime.BoardOfTopic(t); ok {
			boards = append(boards, board)
		}
	}
	entries := map[string]ranking.Entry{}
	for len(boards) > 0 {
		k := min(len(boards), ranking.MaxBatch)
		got, err := ps.boards.GetMany(ctx, boards[:k], user)
		if err != nil {
			return nil, err
		}
		for b, e := range got {
			entries[b] = e
		}
		boards = boards[k:]
	}
	return entries, nil
}
