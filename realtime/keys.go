package realtime

import "github.com/chatd/chatd/internal/keyspace"

// The realtime core's own channels. Its keys belong to the domain packages;
// these carry commands between nodes.

// adminChannel carries the admin console's commands to every node
// (disconnect a user or one connection).
func adminChannel(prefix string) string {
	return keyspace.New(prefix).Global("admin", "commands") // CHANNEL JSON adminCommand
}
