package realtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/ranking"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// restAttach is the attachment of a REST session to its seats.
func restAttach(session string) rooms.Attach { return rooms.Attach{ID: "rest:" + session, REST: true} }

// JoinREST seats user in lobby for a REST session: the session becomes an
// attachment of the seat and the room joins its poll cursor, starting after
// the room's newest message, so the next poll of "messages" returns what is
// sent from now on.
func (n *Node) JoinREST(ctx context.Context, user, session, lobby string) (rooms.Room, error) {
	if err := n.allowNewLobby(ctx, user, lobby); err != nil {
		return rooms.Room{}, err
	}
	room, err := n.rooms.Join(ctx, lobby, user, restAttach(session))
	if err != nil {
		return rooms.Room{}, err
	}
	n.restEnter(ctx, user, session, room.ID)
	n.markRoom(room.ID, dirty.Of(dirty.Rooms))
	return room, nil
}

func (n *Node) restEnter(ctx context.Context, user, session, room string) {
	if _, err := n.dirty.Open(ctx, session, user); err != nil {
		n.log.Debug("open session", "err", err)
		return
	}
	cur, err := n.dirty.Cursor(ctx, session, []string{room})
	if err == nil && cur[room] != "" {
		return // already in the room: keep its place
	}
	last := "0"
	if msgs, err := n.rooms.History(ctx, room, "", 1); err == nil && len(msgs) == 1 {
		last = msgs[0].ID
	}
	if err := n.dirty.SetCursor(ctx, session, map[string]string{room: last}); err != nil {
		n.log.Debug("set cursor", "err", err)
	}
	n.renewed.forget(session)
}

// LeaveREST frees user's seat in room (an explicit leave) and drops the
// room from the session's poll.
func (n *Node) LeaveREST(ctx context.Context, user, session, room string) error {
	if _, _, err := rooms.ParseRoom(room); err != nil {
		return err
	}
	if err := n.rooms.Leave(ctx, room, user); err != nil && !errors.Is(err, rooms.ErrNotSeated) {
		return err
	}
	if err := n.dirty.DropCursor(ctx, session, room); err != nil {
		n.log.Debug("drop cursor", "err", err)
	}
	n.leftRoom(user, room, nil)
	return nil
}

// renewREST renews the seats of a polling session's rooms and its user's
// presence (a REST user in no room is online too). A seat that lapsed (the
// session did not poll within the lease) is dropped from the session's rooms
// and its rooms bit set, so this very poll tells the client to join again.
func (n *Node) renewREST(ctx context.Context, user, session string) {
	cur, err := n.dirty.Cursors(ctx, session)
	if err != nil {
		n.log.Debug("read REST rooms", "err", err)
		return
	}
	atts := make([]rooms.Attachment, 0, len(cur))
	id := restAttach(session).ID
	for room := range cur {
		atts = append(atts, rooms.Attachment{Room: room, User: user, ID: id})
	}
	held := make([]string, 0, len(cur))
	if len(atts) > 0 {
		lost, err := n.rooms.Renew(ctx, atts)
		if err != nil {
			n.log.Debug("renew REST seats", "err", err)
			lost = nil
		}
		gone := map[string]bool{}
		for _, a := range lost {
			gone[a.Room] = true
			if err := n.dirty.DropCursor(ctx, session, a.Room); err != nil {
				n.log.Debug("drop lapsed REST room", "err", err)
			}
		}
		if len(gone) > 0 {
			if err := n.dirty.MarkSessions(ctx, []string{session}, dirty.Of(dirty.Rooms)); err != nil {
				n.log.Debug("mark lapsed REST room", "err", err)
			}
		}
		for _, a := range atts {
			if !gone[a.Room] {
				held = append(held, a.Room)
			}
		}
	}
	n.rest.put(user, session, held, n.cfg.Now())
	n.touchUser(ctx, user)
}

// restSessions remembers the REST sessions that polled this node within a
// lease, with their rooms, so that this node's presence claim for a user
// covers them too (a closing WebSocket of the same user does not make
// her look offline).
type restSessions struct {
	mu sync.Mutex
	m  map[string]map[string]restSeen // user → session → rooms
}

type restSeen struct {
	rooms []string
	at    time.Time
}

func (r *restSessions) put(user, session string, rs []string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]map[string]restSeen{}
	}
	if at.IsZero() {
		return
	}
	m := r.m[user]
	if m == nil {
		m = map[string]restSeen{}
		r.m[user] = m
	}
	m[session] = restSeen{rs, at}
}

// of returns the rooms of user's live REST sessions here, and whether it
// has any.
func (r *restSessions) of(user string, now time.Time, lease time.Duration) ([]string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	live := false
	for sid, s := range r.m[user] {
		if now.Sub(s.at) > lease {
			delete(r.m[user], sid)
			continue
		}
		live = true
		out = append(out, s.rooms...)
	}
	if len(r.m[user]) == 0 {
		delete(r.m, user)
	}
	return out, live
}

// all returns the rooms of every user with a live REST session here,
// forgetting the lapsed ones.
func (r *restSessions) all(now time.Time, lease time.Duration) map[string][]string {
	r.mu.Lock()
	users := make([]string, 0, len(r.m))
	for u := range r.m {
		users = append(users, u)
	}
	r.mu.Unlock()
	out := map[string][]string{}
	for _, u := range users {
		if rs, ok := r.of(u, now, lease); ok {
			out[u] = rs
		}
	}
	return out
}

// renewals throttles the seat and presence renewals polls trigger: a
// session's seats are renewed by this node at most once per third of the
// lease, so a clean poll stays one Redis command. It keeps when each session
// was last renewed, not when the next renewal is due, so that a shorter
// lease (seat.lease_seconds lowered) applies to the very next poll.
type renewals struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (r *renewals) forget(sid string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, sid)
}

func (r *renewals) due(sid string, now time.Time, every time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if last, ok := r.last[sid]; ok && !now.Before(last) && now.Sub(last) < every {
		return false
	}
	if len(r.last) > 100_000 {
		// an entry at least `every` old is due anyway: dropping it changes nothing
		for k, t := range r.last {
			if now.Sub(t) >= every {
				delete(r.last, k)
			}
		}
	}
	r.last[sid] = now
	return true
}

// isBoardTopic returns the board of a followed topic.
func isBoardTopic(t string) (string, bool) { return strings.CutPrefix(t, "lb:") }

// PostScore posts a player's score to a board as user: the poster follows
// the board (its polls then carry the board), and if the post changed the
// board every follower is marked (through the ranking service's OnChange
// hook).
func (n *Node) PostScore(ctx context.Context, user, board, player string, score ranking.Score, mode ranking.Mode) (ranking.Entry, error) {
	if err := names.Board(board); err != nil {
		return ranking.Entry{}, err
	}
	if err := names.Player(player); err != nil {
		return ranking.Entry{}, err // a bad post costs no new-board token
	}
	if n.settings.Int(settings.NewBoardsPerUserPerMin) > 0 {
		exists, err := n.ranking.Exists(ctx, board)
		if err != nil {
			return ranking.Entry{}, err
		}
		if !exists {
			ok, _, err := n.boards.Allow(ctx, user)
			if err != nil {
				return ranking.Entry{}, err
			}
			if !ok {
				return ranking.Entry{}, fmt.Errorf("%w: at most %d new leaderboards a minute; post to an existing one", ErrTooManyBoards, n.settings.Int(settings.NewBoardsPerUserPerMin))
			}
		}
	}
	changed := new(bool)
	e, err := n.ranking.Post(context.WithValue(ctx, boardChangedKey{}, changed), board, player, score, mode)
	if err != nil {
		return ranking.Entry{}, err
	}
	// follow first, then mark: the poster's own sessions are marked too
	if err := n.dirty.Follow(ctx, BoardTopic(board), user); err != nil {
		n.log.Debug("follow board", "err", err)
	}
	if *changed {
		n.markBoard(board)
	}
	return e, nil
}

// boardChangedKey marks the context of a score post; the ranking service's
// OnChange hook sets the flag it carries when the post changed the board.
type boardChangedKey struct{}

func noteBoardChange(ctx context.Context, _ string, _ ranking.Entry) {
	if p, ok := ctx.Value(boardChangedKey{}).(*bool); ok {
		*p = true
	}
}
