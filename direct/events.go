package direct

// The events this package publishes, encoded once here and forwarded to
// the connections as they are (docs/PROTOCOL.md, "Server → client").
const (
	// EventMessage is a direct message (protocol.DM).
	EventMessage = "dm"
	// EventRemoved is a removal by an admin (protocol.DMRemoved).
	EventRemoved = "dm_removed"
)
