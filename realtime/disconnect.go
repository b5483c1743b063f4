package realtime

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// The node's command channel: a disconnect decided on one node (the admin
// console's) acts on every node, like centrifuge's Node.Disconnect over its
// control channel. The user's clients are wherever the load balancer put
// them; a local close would miss them.

// command is a command on the command channel (adminChannel).
type command struct {
	Type   string `json:"type"` // "disconnect", "unseat" (unseat.go)
	User   string `json:"user"`
	Room   string `json:"room,omitempty"` // "unseat": the room
	Node   string `json:"node,omitempty"` // "" = every node
	Conn   string `json:"conn,omitempty"` // "" = every connection of the user
	Reason string `json:"reason,omitempty"`
}

// Disconnect closes user's realtime clients on every node with 4001
// (reason, clipped to 120 bytes, as the close reason; "disconnected by an
// admin" when empty) — or only the client with id conn (Client.ID) of
// node when conn is given ("" = any). Nothing is stored: the user may
// reconnect at once. The caller validates the names; Disconnect returns
// Redis errors.
func (n *Node) Disconnect(ctx context.Context, user, node, conn, reason string) error {
	b, err := json.Marshal(command{Type: "disconnect", User: user, Node: node, Conn: conn, Reason: reason})
	if err != nil {
		return err
	}
	if err := n.cfg.Redis.Publish(ctx, adminChannel(n.cfg.Prefix), b).Err(); err != nil {
		return fmt.Errorf("realtime: disconnect %s: %w", user, err)
	}
	return nil
}

// receiveCommand acts on a command from any node, this one included.
func (n *Node) receiveCommand(_ string, p []byte) {
	var c command
	if json.Unmarshal(p, &c) != nil || c.User == "" {
		return
	}
	if c.Type == "unseat" {
		n.unseat(c)
		return
	}
	if c.Type != "disconnect" || c.Node != "" && c.Node != n.cfg.Node {
		return
	}
	reason := c.Reason
	if reason == "" {
		reason = "disconnected by an admin"
	}
	for _, cl := range n.hub.UserClients(c.User) {
		if c.Conn == "" || cl.id == c.Conn {
			cl.Close(CloseKicked, ClipRunes(reason, 120))
		}
	}
}

// CloseUser closes user's clients on this node (holder "" = any, else
// only those of that guest holder) with code and reason; user in any case
// (names compare canonically).
func (h *Hub) CloseUser(user, holder string, code int, reason string) {
	for _, c := range h.UserClients(user) {
		if holder == "" || c.p.Holder == holder {
			c.Close(code, reason)
		}
	}
}

// ClipRunes cuts s to at most n bytes on a rune boundary.
func ClipRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
