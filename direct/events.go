package direct

// The events this package publishes, encoded once here and forwarded to
// the connections as they are (docs/PROTOCOL.md, "Server → client").
const (
	// EventMessage is a direct message (protocol.DM).
	EventMessage = "dm"
	// EventRemoved is a removal by an admin (protocol.DMRemoved).
	EventRemoved = "dm_removed"
)

// NodeEventBlocks carries a user's whole block set after a change:
// {"type":"blocks","blocks":["bob",…]}. It is for the nodes, not the
// connections (so it is no Event constant, and not in the protocol): each
// node replaces the set its clients of the user hold
// (realtime.Client.SetBlocks) and forwards nothing.
const NodeEventBlocks = "blocks"
