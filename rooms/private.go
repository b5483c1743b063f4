package rooms

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// MaxPrivatePlayers bounds the users of one private room.
const MaxPrivatePlayers = 100

// Private makes private rooms: room 1 of a lobby of its own (or a room of
// a number the caller picks), for a fixed set of users, whose seats are
// reserved until they take them with Seats.Reclaim. It owns
// lua/room_private.lua and the "private" field of the lobby's records,
// which every seat script reads (see the package doc, "private rooms");
// the seats it makes are Seats' like any other.
type Private struct {
	*base
	seats *Seats // the sweeper's index a new private lobby goes into
}

// Create creates a private room for users: room 1 of lobby, a
// lobby of its own (the caller picks a name nobody joins, say
// "mm.duel.7" for match 7 of queue duel), with a seat already held for
// each user until reserve has passed. A user takes theirs with Reclaim of
// the room (a resume, which attaches the connection or REST session, and
// from then on the seat lives by its attachments like any other); a seat
// nobody attached to by then is reaped by the lobby's next seat script or
// the sweeper, with a "left" event, exactly like a lapsed lease. The
// lobby refuses every Join (ErrPrivateRoom), the room every Reclaim by
// another user, and the lobby is never listed by Lobbies.
//
// It is one script (lua/room_private.lua) and idempotent: a retry for the
// same users answers the same room (with its members now). It returns
// ErrLobbyTaken when the lobby holds rooms already (public, or private for
// other users), an error wrapping names.ErrBadName for a bad lobby or user
// name or for no user, more than MaxPrivatePlayers or one twice, and Redis
// errors.
func (s *Private) Create(ctx context.Context, lobby string, users []string, reserve time.Duration) (Room, error) {
	return s.CreateRoom(ctx, lobby+"-1", users, reserve)
}

// CreateRoom is Create for a room of a number the caller
// picks: the room roomID ("{lobby}-{seq}"), its lobby's only room. A
// number nobody can guess (PrivateRoomSeq) keeps a private room's id from
// being enumerated, though ids of its lobby's name are sequential. A retry
// answers the room as it was made, whatever number it asks. It returns
// what Create returns, and an error wrapping names.ErrBadName for a
// malformed room id.
func (s *Private) CreateRoom(ctx context.Context, roomID string, users []string, reserve time.Duration) (Room, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = s.checkPrivate(lobby, users)
	}
	if err != nil {
		return Room{}, fmt.Errorf("rooms: create private room %s: %w", clip(roomID), err)
	}
	if reserve < time.Millisecond {
		reserve = s.leaseDur()
	}
	args := append(s.lobbyArgs(lobby), ms(s.now().Add(reserve)), seq)
	for _, u := range users {
		args = append(args, u)
	}
	v, err := redisx.Run(ctx, s.rdb, roomPrivateScript, s.lobbyKeys(lobby), args...).Slice()
	if err != nil {
		return Room{}, fmt.Errorf("rooms: create private room in %s: %w", lobby, err)
	}
	if len(v) == 1 && v[0] == int64(-1) {
		return Room{}, fmt.Errorf("rooms: create private room in %s: %w", lobby, ErrLobbyTaken)
	}
	if len(v) != 4 {
		return Room{}, fmt.Errorf("rooms: create private room in %s: %w", lobby, errUnexpectedReply)
	}
	if got, _ := v[3].(string); got != "" {
		if seq, err = strconv.Atoi(got); err != nil {
			return Room{}, fmt.Errorf("rooms: create private room in %s: %w", lobby, errUnexpectedReply)
		}
	}
	list, _ := v[1].([]any)
	members := make([]string, 0, len(list))
	for _, m := range list {
		str, _ := m.(string)
		members = append(members, str)
	}
	flags, _ := v[2].([]any)
	if len(flags) >= 2 {
		// A room that existed (2) may be the Redis client's retry of a
		// call whose first copy woke the lobby and whose answer was lost:
		// it is registered too (ZADD NX), or the sweeper would never visit
		// a lobby nobody attaches to.
		if flags[0] == int64(1) || v[0] == int64(2) {
			s.seats.register(ctx, lobby)
		}
		if v[0] == int64(1) {
			if err := countRooms(ctx, s.rdb, s.ks, 1); err != nil {
				s.m.counterErrors.Inc()
			}
		}
	}
	r := s.room(lobby, seq, members)
	r.Capacity = max(r.Capacity, len(users))
	return r, nil
}

// PrivateRoomSeq returns a room number of 12 digits, from key and name
// by HMAC-SHA256: the same on every node that holds key, and unguessable
// without it (about 2^39 numbers). For CreateRoom, with a key the
// nodes share and a name unique per private room (a match's id).
func PrivateRoomSeq(key []byte, name string) int {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(name))
	n := binary.BigEndian.Uint64(mac.Sum(nil)[:8])
	const low, span = 100_000_000_000, 900_000_000_000 // 12 digits, no leading zero
	return low + int(n%span)
}

func (s *Private) checkPrivate(lobby string, users []string) error {
	if err := names.Lobby(lobby); err != nil {
		return err
	}
	if len(users) == 0 || len(users) > MaxPrivatePlayers {
		return fmt.Errorf("%w: a private room is for 1 to %d users, not %d", names.ErrBadName, MaxPrivatePlayers, len(users))
	}
	seen := make([]string, 0, len(users))
	for _, u := range users {
		if err := names.User(u); err != nil {
			return err
		}
		if slices.Contains(seen, u) {
			return fmt.Errorf("%w: user %s is named twice", names.ErrBadName, u)
		}
		seen = append(seen, u)
	}
	return nil
}

// Players returns the users a private room was made for (Create),
// as they were given, and true, for any room id of a private lobby; for a
// room of a public lobby, or of a lobby that does not exist, it returns
// nil and false. It is one HGET of the lobby's records. It returns an error wrapping names.ErrBadName for a
// malformed room id, and Redis errors.
func (s *Private) Players(ctx context.Context, roomID string) ([]string, bool, error) {
	lobby, _, err := ParseRoom(roomID)
	if err != nil {
		return nil, false, fmt.Errorf("rooms: players of %s: %w", clip(roomID), err)
	}
	list, err := s.rdb.HGet(ctx, recordsKey(s.ks, lobby), "private").Result()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("rooms: players of %s: %w", roomID, err)
	}
	return strings.Fields(list), true, nil
}

// IsPlayer reports whether user (in any case: names compare canonically)
// is one of players.
func IsPlayer(players []string, user string) bool {
	c := names.Canonical(user)
	return slices.ContainsFunc(players, func(u string) bool { return names.Canonical(u) == c })
}
