package rooms

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"

	"github.com/chatd/chatd/names"
)

// UnreadMax caps the count Unread reports for one room.
const UnreadMax = 1000

// ReadMarks keeps each user's last-read message per room (MarkRead) and
// counts the messages after it (Unread). It owns the users' read marks
// (readKey) and lua/read_mark.lua and unread_count.lua; it reads the
// rooms' histories. See the package doc, "unread counts".
type ReadMarks struct {
	*base
}

// MarkRead records that user has read the room up to the message id (padded
// or as Redis writes it, see NormalizeID). The last-read id never moves
// backwards: marking an older id than the one recorded changes nothing, and
// so does marking anything in a room with no messages; an id after the
// room's newest message counts as the newest (a made-up id cannot hide
// messages not sent yet). The compare and the write are one script on the
// lobby's slot; the user's last-read ids in the lobby expire
// Config.IdleTTL after their last MarkRead. The user need not be seated.
// It returns ErrBadID, ErrUnknownRoom, names.ErrBadName, and Redis errors,
// wrapped.
func (s *ReadMarks) MarkRead(ctx context.Context, roomID, user, id string) error {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	var padded string
	if err == nil {
		padded, err = NormalizeID(id)
	}
	if err == nil {
		keys := []string{readKey(s.ks, lobby, user), roomsKey(s.ks, lobby), historyKey(s.ks, lobby, seq)}
		var n int64
		n, err = redisx.Run(ctx, s.rdb, readMarkScript, keys, seq, padded, s.idleTTL.Milliseconds()).Int64()
		if err == nil && n == -1 {
			err = ErrUnknownRoom
		}
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("rooms: mark %s read up to %s as %s: %w", roomID, clip(id), user, err)
}

// Unread returns, for each room of roomIDs, how many of its messages come
// after user's last-read id (MarkRead), at most UnreadMax: every message of
// the room's history when the user has marked nothing there, what is left
// after it when the history was trimmed past it, and 0 for a well-formed
// room that does not exist. One pipelined round trip (one read-only script
// per room; on Redis Cluster, one per shard in parallel). It returns
// names.ErrBadName for a malformed user or room id, and Redis errors,
// wrapped.
func (s *ReadMarks) Unread(ctx context.Context, user string, roomIDs []string) (map[string]int, error) {
	if err := names.User(user); err != nil {
		return nil, fmt.Errorf("rooms: unread as %s: %w", user, err)
	}
	type room struct {
		id   string
		keys []string
		seq  int
		cmd  *redis.Cmd
	}
	rooms := make([]*room, 0, len(roomIDs))
	for _, id := range roomIDs {
		lobby, seq, err := ParseRoom(id)
		if err != nil {
			return nil, fmt.Errorf("rooms: unread as %s: %w", user, err)
		}
		rooms = append(rooms, &room{id: id, seq: seq,
			keys: []string{readKey(s.ks, lobby, user), historyKey(s.ks, lobby, seq)}})
	}
	out := make(map[string]int, len(rooms))
	if len(rooms) == 0 {
		return out, nil
	}
	err := redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
		for _, r := range rooms {
			r.cmd = p.Script(unreadCountScript, r.keys, r.seq, UnreadMax)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("rooms: unread of %d rooms as %s: %w", len(rooms), user, err)
	}
	for _, r := range rooms {
		n, err := r.cmd.Int64()
		if err != nil {
			return nil, fmt.Errorf("rooms: unread of %s as %s: %w", r.id, user, err)
		}
		out[r.id] = int(n)
	}
	return out, nil
}
