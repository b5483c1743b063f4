package rooms

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/lock"
	"github.com/chatd/chatd/names"
)

// Seats seats users in the rooms of lobbies and keeps their seats: Join
// and Reclaim claim a seat for an attachment, Detach and Leave free it,
// Renew and the sweeper keep the leases, and Room, Rooms, RoomMany, Seated
// and LobbyExists read who sits where. It owns the lobby-wide seat keys
// (members, leases, attachments, REST holders, rooms, records, counters:
// keys.go), the seat scripts (lua/seat_*.lua, room_create, lobby_sweep,
// lobby_rooms, room_read), the sweeper's index of lobbies, the per-user
// seat cap (seatCap) and the group commit of joins (joinQueues); after
// each seat script it hands the lobby's count to Lobbies. See the package
// doc: "atomic seat claims", "attachments", "a cap on the lobbies", "idle
// lobbies are forgotten", "every key in KEYS".
type Seats struct {
	*base
	lobbies *Lobbies    // the listing index, told every count a seat script returns
	cap     *seatCap    // Config.MaxLobbiesPerUser
	joins   *joinQueues // joins waiting behind one in progress, per lobby
	lockTTL time.Duration

	hist refreshes // "lobby/seq" → when Renew last refreshed its history's TTL
	// fullRenew: "run/lobby" → when KeepRun last renewed the run's attachments there one by one
	fullRenew refreshes

	// beforeCreate, when set (tests), runs between taking the lobby's lock
	// and running the room-creation script.
	beforeCreate func(ctx context.Context, l *lock.Lock)
}

// Reclaim seats user in one given room and records att as an attachment
// of the seat, in one script: the resume path, which takes a user's seat
// back after the lease ran out. A live seat there is kept (lease extended,
// att added or renewed). It returns ErrUnknownRoom, ErrRoomFull when the
// room has no free seat, ErrSeatedElsewhere when the user holds a live seat
// in another room of the lobby, ErrPrivateRoom for a private room the
// user is not a player of, ErrTooManyLobbies when a lobby the user
// holds no seat in would exceed Config.MaxLobbiesPerUser, ErrBadAttachment,
// names.ErrBadName, and Redis errors.
func (s *Seats) Reclaim(ctx context.Context, roomID, user string, att Attach) (Room, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err == nil {
		err = att.check()
	}
	if err != nil {
		return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
	}
	resv, err := s.cap.reserve(ctx, user, lobby)
	if err != nil {
		return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
	}
	res, err := s.claim(ctx, lobby, strconv.Itoa(seq), []*joinReq{{user: user, att: att}})
	defer func() { s.cap.settle(ctx, resv, err) }()
	switch {
	case err != nil:
	case res.codes[0] == -1:
		err = ErrUnknownRoom
	case res.codes[0] == -2:
		err = fmt.Errorf("%w (%s)", ErrSeatedElsewhere, makeRoomID(lobby, res.seqs[0]))
	case res.codes[0] == -4:
		err = ErrPrivateRoom
	case res.codes[0] == 0:
		err = ErrRoomFull
	default:
		return s.room(lobby, res.seqs[0], res.members[res.seqs[0]]), nil
	}
	return Room{}, fmt.Errorf("rooms: reclaim %s as %s: %w", roomID, user, err)
}

// Leave frees user's seat in the room at once, with every attachment of
// it, and publishes a "left" event: an explicit leave, whatever else holds
// the seat. It returns ErrNotSeated when the user holds no seat there,
// ErrUnknownRoom, names.ErrBadName, and Redis errors.
func (s *Seats) Leave(ctx context.Context, roomID, user string) error {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err == nil {
		// The call is recorded (leftKey) and ends within redisx.CallBound,
		// so that go-redis's copy of it is answered by the first one's
		// record instead of freeing a seat taken again meanwhile.
		ctx, cancel := redisx.BoundCall(ctx)
		defer cancel()
		keys := append(s.lobbyKeys(lobby), leftKey(s.ks, lobby, redisx.CallID()))
		args := append(s.lobbyArgs(lobby), user, seq, redisx.CallRecordTTL.Milliseconds())
		var v []int64
		v, err = redisx.Run(ctx, s.rdb, seatReleaseScript, keys, args...).Int64Slice()
		switch {
		case err != nil:
		case len(v) != 2 && len(v) != 6:
			err = errUnexpectedReply
		case v[0] == -1:
			err = ErrUnknownRoom
		case v[0] == 0:
			err = ErrNotSeated
		default:
			if v[1] == 1 {
				s.retire(ctx, lobby)
			}
			if c, ok := countOfInts(lobby, v[2:]); ok {
				s.lobbies.indexCounts(ctx, c)
			}
			return nil
		}
	}
	return fmt.Errorf("rooms: leave %s as %s: %w", roomID, user, err)
}

// Room returns the room with its live members, in one read-only script.
// It returns ErrUnknownRoom, names.ErrBadName, and Redis errors.
func (s *Seats) Room(ctx context.Context, roomID string) (Room, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	v, err := redisx.Run(ctx, s.rdb, roomReadScript, s.roomReadKeys(lobby), seq, ms(s.now())).Slice()
	if err != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	members, ok, err := parseRoomRead(v)
	if err != nil {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, err)
	}
	if !ok {
		return Room{}, fmt.Errorf("rooms: room %s: %w", roomID, ErrUnknownRoom)
	}
	return s.room(lobby, seq, members), nil
}

// roomReadKeys are the KEYS of room_read.lua and lobby_rooms.lua.
func (s *Seats) roomReadKeys(lobby string) []string {
	return []string{roomsKey(s.ks, lobby), membersKey(s.ks, lobby), leasesKey(s.ks, lobby)}
}

// parseRoomRead reads room_read.lua's reply: the live members, and false
// for a room that does not exist.
func parseRoomRead(v []any) (members []string, ok bool, err error) {
	if len(v) == 1 && v[0] == int64(0) {
		return nil, false, nil
	}
	if len(v) != 2 || v[0] != int64(1) {
		return nil, false, errUnexpectedReply
	}
	list, _ := v[1].([]any)
	members = make([]string, 0, len(list))
	for _, m := range list {
		str, _ := m.(string)
		members = append(members, str)
	}
	return members, true, nil
}

// Rooms returns every room of the lobby, lowest number first, with its live
// members; none for a lobby without rooms. It returns names.ErrBadName and
// Redis errors.
func (s *Seats) Rooms(ctx context.Context, lobby string) ([]Room, error) {
	if err := names.Lobby(lobby); err != nil {
		return nil, fmt.Errorf("rooms: rooms of %s: %w", lobby, err)
	}
	v, err := redisx.Run(ctx, s.rdb, lobbyRoomsScript, s.roomReadKeys(lobby), ms(s.now())).Slice()
	if err != nil {
		return nil, fmt.Errorf("rooms: rooms of %s: %w", lobby, err)
	}
	out := make([]Room, 0, len(v)/2)
	for i := 0; i+1 < len(v); i += 2 {
		str, _ := v[i].(string)
		seq, err := strconv.Atoi(str)
		if err != nil {
			return nil, fmt.Errorf("rooms: rooms of %s: unexpected room number %v", lobby, v[i])
		}
		var members []string
		list, _ := v[i+1].([]any)
		for _, m := range list {
			str, _ := m.(string)
			members = append(members, str)
		}
		out = append(out, s.room(lobby, seq, members))
	}
	return out, nil
}

// Seated reports whether user holds a live seat in the room (false for an
// unknown room). It returns names.ErrBadName and Redis errors.
func (s *Seats) Seated(ctx context.Context, roomID, user string) (bool, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err != nil {
		return false, fmt.Errorf("rooms: seated %s as %s: %w", roomID, user, err)
	}
	pipe := s.rdb.Pipeline()
	at := pipe.ZScore(ctx, membersKey(s.ks, lobby), user)
	exp := pipe.ZScore(ctx, leasesKey(s.ks, lobby), user)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("rooms: seated %s as %s: %w", roomID, user, err)
	}
	if at.Err() != nil || exp.Err() != nil || int(at.Val()) != seq {
		return false, nil
	}
	return int64(exp.Val()) > s.now().UnixMilli(), nil
}

// LobbyExists reports whether the lobby has any room (one EXISTS): the
// caller's test before a join that would create a lobby, which it may rate
// limit. It returns names.ErrBadName wrapped and Redis errors.
func (s *Seats) LobbyExists(ctx context.Context, lobby string) (bool, error) {
	if err := names.Lobby(lobby); err != nil {
		return false, fmt.Errorf("rooms: lobby %s: %w", lobby, err)
	}
	n, err := s.rdb.Exists(ctx, roomsKey(s.ks, lobby)).Result()
	if err != nil {
		return false, fmt.Errorf("rooms: lobby %s: %w", lobby, err)
	}
	return n == 1, nil
}

// RoomMany returns the rooms of ids that exist, with their live members, in
// one pipelined round trip (a poll of a user seated in many rooms; one
// read-only script per room); unknown and malformed ids are left out. It
// returns Redis errors.
func (s *Seats) RoomMany(ctx context.Context, ids []string) ([]Room, error) {
	type q struct {
		lobby string
		seq   int
		cmd   *redis.Cmd
	}
	now := ms(s.now())
	qs := make([]q, 0, len(ids))
	for _, id := range ids {
		if lobby, seq, err := ParseRoom(id); err == nil {
			qs = append(qs, q{lobby: lobby, seq: seq})
		}
	}
	if len(qs) == 0 {
		return nil, nil
	}
	err := redisx.Pipelined(ctx, s.rdb, func(p *redisx.Pipe) {
		for i := range qs {
			qs[i].cmd = p.Script(roomReadScript, s.roomReadKeys(qs[i].lobby), qs[i].seq, now)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("rooms: %d rooms: %w", len(qs), err)
	}
	out := make([]Room, 0, len(qs))
	for _, x := range qs {
		v, err := x.cmd.Slice()
		if err != nil {
			return nil, fmt.Errorf("rooms: %d rooms: %w", len(qs), err)
		}
		members, ok, err := parseRoomRead(v)
		if err != nil {
			return nil, fmt.Errorf("rooms: %d rooms: %w", len(qs), err)
		}
		if ok {
			out = append(out, s.room(x.lobby, x.seq, members))
		}
	}
	return out, nil
}
