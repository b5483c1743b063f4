package rooms

import (
	"context"
	"errors"
	"fmt"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// ErrNotPrivate is returned by Grant and Revoke for a room of a public
// lobby: anyone may join it, there is no access to give or take.
var ErrNotPrivate = errcode.New(errcode.NotPrivate, "rooms: the room is not private")

// Grant lets user into the private room roomID (Create) besides the users
// it was made for — a spectator, a substitute — in one script
// (lua/room_grant.lua) on the lobby's records: from then on the seat
// scripts let the user claim the room's seat (Seats.Reclaim), and
// Private.Players lists them, so every read of the room admits them. No
// seat is reserved: the user takes one by resuming the room. It reports
// whether the room's users changed (false for a user already in: a retry
// changes nothing). A retry of the room's Create still answers the same
// room.
//
// It returns ErrUnknownRoom, ErrNotPrivate, an error wrapping ErrRoomFull
// when the room has MaxPrivatePlayers users already, an error wrapping
// names.ErrBadName for a malformed room id or user name, and Redis errors.
func (s *Private) Grant(ctx context.Context, roomID, user string) (bool, error) {
	return s.grant(ctx, roomID, user, "grant")
}

// Revoke takes user out of the private room's users (Grant, or one it was
// made for) and frees their seat there, if they hold one, with every
// attachment of it (a "left" event, as Seats.Leave): from then on the
// seat scripts refuse the user's claim, and reads of the room answer them
// as for a room that does not exist. The user's clients still in the room
// are the realtime core's to take out (realtime.Node.Unseat). It reports
// whether the room's users changed (false for a user not among them: a
// retry changes nothing, and frees a seat still held).
//
// It returns ErrUnknownRoom, ErrNotPrivate, an error wrapping
// names.ErrBadName, and Redis errors.
func (s *Private) Revoke(ctx context.Context, roomID, user string) (bool, error) {
	changed, err := s.grant(ctx, roomID, user, "revoke")
	if err != nil {
		return false, err
	}
	// The users changed first: no claim can take the seat back from here.
	if err := s.seats.Leave(ctx, roomID, user); err != nil && !errors.Is(err, ErrNotSeated) {
		return changed, fmt.Errorf("rooms: revoke %s in %s: %w", user, roomID, err)
	}
	return changed, nil
}

func (s *Private) grant(ctx context.Context, roomID, user, op string) (bool, error) {
	lobby, seq, err := ParseRoom(roomID)
	if err == nil {
		err = names.User(user)
	}
	if err != nil {
		return false, fmt.Errorf("rooms: %s %s in %s: %w", op, clip(user), clip(roomID), err)
	}
	v, err := redisx.Run(ctx, s.rdb, roomGrantScript, []string{recordsKey(s.ks, lobby)}, seq, user, op, MaxPrivatePlayers).Int64Slice()
	switch {
	case err != nil:
	case len(v) != 1:
		err = errUnexpectedReply
	case v[0] == -1:
		err = ErrUnknownRoom
	case v[0] == -2:
		err = ErrNotPrivate
	case v[0] == -3:
		err = fmt.Errorf("%w: a private room is for at most %d users", ErrRoomFull, MaxPrivatePlayers)
	default:
		return v[0] == 1, nil
	}
	return false, fmt.Errorf("rooms: %s %s in %s: %w", op, user, roomID, err)
}
