package chat

import (
	"context"
	"errors"
	"fmt"

	"github.com/chatd/chatd/rooms"
)

// Viewer is who reads a room, a lobby's rooms or a user's presence: a
// user (their session's Principal.User) or an admin (either admin token,
// full or read-only), who sees everything.
type Viewer struct {
	User  string
	Admin bool
}

// CanSee is the one access rule of rooms for reads and marks: a room of a
// public lobby is anyone's to read; a private room (a match's, made by
// rooms.Private.Create) only its players' and the admins'. Anyone else is
// answered rooms.ErrUnknownRoom (404 unknown_room), exactly what a room
// that does not exist answers, so an outsider learns nothing of it; a
// claim of its seat (resume, POST /rooms/{room}/join) answers the same
// (claimRoom). It returns an error wrapping names.ErrBadName for a malformed room id, and
// Redis errors.
func (ch *Chat) CanSee(ctx context.Context, v Viewer, room string) error {
	if v.Admin {
		return nil
	}
	players, private, err := ch.players.Players(ctx, room)
	if err != nil {
		return err
	}
	if private && !rooms.IsPlayer(players, v.User) {
		return fmt.Errorf("realtime: room %s: %w", room, rooms.ErrUnknownRoom)
	}
	return nil
}

// visibleRooms keeps the rooms of list that v may see (CanSee); a room
// whose rule could not be read is left out.
func (ch *Chat) visibleRooms(ctx context.Context, v Viewer, list []string) []string {
	if v.Admin || len(list) == 0 {
		return list
	}
	out := make([]string, 0, len(list))
	for _, r := range list {
		if ch.CanSee(ctx, v, r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// claimRoom is rooms' Reclaim of room by id for user, with a private room
// of other players answered as a room that does not exist
// (rooms.ErrUnknownRoom, 404), as CanSee answers its reads: a 403 would
// tell whoever guesses a match room's id that it hit one.
func (ch *Chat) claimRoom(ctx context.Context, room, user string, att rooms.Attach) (rooms.Room, error) {
	r, err := ch.seats.Reclaim(ctx, room, user, att)
	if errors.Is(err, rooms.ErrPrivateRoom) {
		return rooms.Room{}, fmt.Errorf("realtime: claim %s: %w", room, rooms.ErrUnknownRoom)
	}
	return r, err
}
