package realtime

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/protocol"
)

// Unseat takes user's realtime clients out of room on every node, over the
// command channel (as Disconnect): each gets a "left" event for the room
// and no more of its events; the connections stay open. The REST sessions
// of the user in the room are marked (dirty.Rooms). It is the core's half
// of a revoked access to a private room (the server API's revoke): the
// seat and the access are gone already (rooms.Private.Revoke), so no
// client can take the room back. The caller validates the names; Unseat
// returns Redis errors.
func (n *Node) Unseat(ctx context.Context, user, room string) error {
	b, err := json.Marshal(command{Type: "unseat", User: user, Room: room})
	if err != nil {
		return err
	}
	if err := n.cfg.Redis.Publish(ctx, adminChannel(n.cfg.Prefix), b).Err(); err != nil {
		return fmt.Errorf("realtime: unseat %s from %s: %w", user, room, err)
	}
	return nil
}

// unseat acts on an "unseat" command on this node (Unseat).
func (n *Node) unseat(c command) {
	if c.Room == "" {
		return
	}
	for _, cl := range n.hub.UserClients(c.User) {
		if !cl.InRoom(c.Room) {
			continue
		}
		n.hub.removeFromRoom(c.Room, cl)
		cl.dropFeed(c.Room)
		cl.SendEvent(protocol.Left{Room: c.Room})
	}
	n.marks.room(c.Room, dirty.Of(dirty.Rooms))
}
