package rooms

import (
	"context"
	_ "embed" // Lua source
	"fmt"
	"strconv"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/protocol"
)

//go:embed lua/message_remove.lua
var messageRemoveSrc string

var messageRemoveScript = redisx.NewScript("rooms.message_remove", redisx.CallRecordLua+messageRemoveSrc)

// EventRemoved is the type of the event Remove publishes.
const EventRemoved = "message_removed"

// ErrNoMessage is returned by Remove for an id that is not in the room's
// history (never sent, trimmed, or removed already).
var ErrNoMessage = errcode.New(errcode.UnknownMessage, "rooms: no such message in the history")

// Remove deletes a message from the room's history ([XDEL]) and publishes
// {"type":"message_removed","room","id"} on the room's channel in the same
// script: every member on every node is told, and History (hence replays,
// gap fills and polls) no longer returns it. id may be padded or in Redis'
// form. It returns ErrNoMessage, ErrUnknownRoom, ErrBadID,
// names.ErrBadName, and Redis errors.
//
// [XDEL]: https://redis.io/commands/xdel/
func (s *Messages) Remove(ctx context.Context, roomID, id string) error {
	if err := s.remove(ctx, roomID, id); err != nil {
		return fmt.Errorf("rooms: remove %s from %s: %w", clip(id), roomID, err)
	}
	return nil
}

func (s *Messages) remove(ctx context.Context, roomID, id string) error {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return err
	}
	ms, sq, err := parseID(id)
	if err != nil {
		return err
	}
	ev, err := protocol.Encode(protocol.MessageRemoved{Room: roomID, ID: formatID(ms, sq)})
	if err != nil {
		return err
	}
	raw := strconv.FormatUint(ms, 10) + "-" + strconv.FormatUint(sq, 10)
	// recorded under the call, which ends while the record is kept: the
	// Redis client's retry of a late call answers the first copy's result
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	keys := []string{roomsKey(s.ks, lobby), historyKey(s.ks, lobby, seq), removedKey(s.ks, lobby, redisx.CallID())}
	n, err := redisx.Run(ctx, s.rdb, messageRemoveScript, keys,
		seq, raw, channel(s.ks, lobby, seq), ev, s.publish, redisx.CallRecordTTL.Milliseconds()).Int64()
	switch {
	case err != nil:
		return err
	case n == -1:
		return ErrUnknownRoom
	case n == 0:
		return ErrNoMessage
	}
	return nil
}

// PublishTyping publishes an ephemeral {"type":"typing","room","user"}
// event on the room's channel: never stored, for the members' clients to
// show for a few seconds. Rate limiting is the caller's (one per user per
// room per 2 s, by the node that takes the frame). It returns ErrBadName
// wrapped for a bad room id, and Redis errors.
func (s *Messages) PublishTyping(ctx context.Context, roomID, user string) error {
	lobby, seq, err := ParseRoom(roomID)
	if err != nil {
		return fmt.Errorf("rooms: typing in %s: %w", roomID, err)
	}
	ev, err := protocol.Encode(protocol.TypingEvent{Room: roomID, User: user})
	if err != nil {
		return err
	}
	return s.rdb.Do(ctx, s.publish, channel(s.ks, lobby, seq), ev).Err()
}
