package client

import (
	"time"

	"github.com/chatd/chatd/protocol"
)

// The shapes of docs/PROTOCOL.md ("Shapes"). Fields the server adds later
// are ignored, as the compatibility rule asks of clients.

// Room is a room of a lobby and who holds a seat in it (the protocol's
// Room: ID "{lobby}-{seq}", Lobby, Seq, Capacity, Members).
type Room = protocol.Room

// Message is a chat message (the protocol's Message). Ids of one room sort
// in send order as strings (13 digits of milliseconds, '-', 6 digits of
// sequence).
type Message = protocol.Message

// LobbyInfo is one lobby of GET /lobbies.
type LobbyInfo struct {
	Lobby  string `json:"lobby"`
	Online int    `json:"online"` // seated users
	Rooms  int    `json:"rooms"`
}

// Entry is a player's place on a leaderboard. Rank 0 is best; a player
// with no score (in a Ranks answer) has rank -1 and score 0. Scores are
// held exactly by the server (at most three decimals, magnitude at most
// 1e15); a float64 holds them exactly up to about 15 significant digits.
type Entry struct {
	Player string  `json:"player"`
	Score  float64 `json:"score"`
	Rank   int64   `json:"rank"`
}

// ScoreMode says how a posted score combines with the stored one.
type ScoreMode string

// Score modes of POST /leaderboards/{board}/scores.
const (
	ScoreBest ScoreMode = "best" // keep the higher (the default)
	ScoreIncr ScoreMode = "incr" // add to the stored score (from 0)
	ScoreSet  ScoreMode = "set"  // replace it
)

// Wallet is a user's balance and items.
type Wallet struct {
	Balance int64            `json:"balance"`
	Items   map[string]int64 `json:"items"`
}

// Item is a shop item: units in stock and unit price.
type Item struct {
	Item  string `json:"item"`
	Stock int64  `json:"stock"`
	Price int64  `json:"price"`
}

// Settings is every live setting's value (defaults included) and the
// settings version, which only grows.
type Settings struct {
	Version int64          `json:"version"`
	Values  map[string]any `json:"values"` // float64 for int and number settings, string for strings
}

// SettingDef describes a live setting (GET /settings/defs).
type SettingDef struct {
	Key          string   `json:"key"`
	Type         string   `json:"type"` // "int", "number" or "string"
	Description  string   `json:"description"`
	Default      any      `json:"default"`
	Min          float64  `json:"min"` // for a string: bounds on its length in characters
	Max          float64  `json:"max"`
	MinExclusive bool     `json:"min_exclusive"`
	Enum         []string `json:"enum,omitempty"`
}

// Notice is an admin notice.
type Notice struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// Presence is where a user is online.
type Presence struct {
	User     string    `json:"user"`
	Online   bool      `json:"online"`
	Node     string    `json:"node"`
	Rooms    []string  `json:"rooms"`
	LastSeen time.Time `json:"last_seen"` // zero for a user never seen
}

// Stats are the global counters of GET /stats.
type Stats struct {
	MessagesTotal  int64 `json:"messages_total"`
	RoomsTotal     int64 `json:"rooms_total"`
	Online         int64 `json:"online"`
	Nodes          int64 `json:"nodes"`
	PurchasesTotal int64 `json:"purchases_total"`
}

// NodeInfo is a live node (GET /nodes, admin).
type NodeInfo struct {
	ID            string    `json:"id"`
	Addr          string    `json:"addr"`
	Connections   int       `json:"connections"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Version is the node's build version ("" when not stamped).
	Version string `json:"version"`
	// StartedAt is when the node started (nil from a node that does not say).
	StartedAt *time.Time `json:"started_at"`
	// UptimeSeconds is the seconds since StartedAt.
	UptimeSeconds int64 `json:"uptime_seconds"`
	// CPU is the process's CPU use over its last heartbeat interval, in cores.
	CPU float64 `json:"cpu"`
	// MemoryBytes is what the Go runtime holds from the OS.
	MemoryBytes uint64 `json:"memory_bytes"`
	// HeapBytes is the Go heap's objects.
	HeapBytes uint64 `json:"heap_bytes"`
	// Goroutines is the node's goroutines.
	Goroutines int `json:"goroutines"`
}

// Sanction is an active mute or ban.
type Sanction struct {
	User   string    `json:"user"`
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

// Sanctions are the active mutes and bans (GET /moderation, admin).
type Sanctions struct {
	Mutes []Sanction `json:"mutes"`
	Bans  []Sanction `json:"bans"`
}
