package chat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/hooks"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// chatSeats is what the chat use case needs of the seats: claim, keep and
// free a user's seats, and read who sits where.
type chatSeats interface {
	Join(ctx context.Context, lobby, user string, att rooms.Attach) (rooms.Room, error)
	Reclaim(ctx context.Context, roomID, user string, att rooms.Attach) (rooms.Room, error)
	Leave(ctx context.Context, roomID, user string) error
	Detach(ctx context.Context, roomID, user, attID string) (freed bool, err error)
	Renew(ctx context.Context, atts []rooms.Attachment) (lost []rooms.Attachment, err error)
	KeepRun(ctx context.Context, run string, atts []rooms.Attachment) (lost []rooms.Attachment, err error)
	Room(ctx context.Context, roomID string) (rooms.Room, error)
	Rooms(ctx context.Context, lobby string) ([]rooms.Room, error)
	LobbyExists(ctx context.Context, lobby string) (bool, error)
}

// chatMessages is what the chat use case needs of the rooms' messages.
type chatMessages interface {
	SendMany(ctx context.Context, reqs []rooms.SendRequest, opt rooms.SendOptions) []rooms.SendReply
	History(ctx context.Context, roomID, after string, limit int) ([]rooms.Message, error)
	PublishTyping(ctx context.Context, roomID, user string) error
}

// lobbyLister lists the lobbies with seated users.
type lobbyLister interface {
	List(ctx context.Context, limit int) ([]rooms.LobbyInfo, error)
}

// readMarks keeps a user's read marks and counts what is unread.
type readMarks interface {
	MarkRead(ctx context.Context, roomID, user, id string) error
	Unread(ctx context.Context, user string, roomIDs []string) (map[string]int, error)
}

// playerList tells the players of a private room (CanSee).
type playerList interface {
	Players(ctx context.Context, roomID string) ([]string, bool, error)
}

// chatPresence is what the chat use case needs of presence.
type chatPresence interface {
	Touch(ctx context.Context, node string, users []presence.UserState) error
	Offline(ctx context.Context, user, node string) error
	KeepOnline(ctx context.Context, users []string) error
	Get(ctx context.Context, user string) (presence.Status, error)
	TTL() time.Duration
}

// cursors is what the chat and poll use cases need of a REST session's
// dirty state: its rooms and its place in each.
type cursors interface {
	Open(ctx context.Context, session, user string) (created bool, err error)
	Cursor(ctx context.Context, session string, rooms []string) (map[string]string, error)
	Cursors(ctx context.Context, session string) (map[string]string, error)
	SetCursor(ctx context.Context, session string, cur map[string]string) error
	DropCursor(ctx context.Context, session, room string) error
	MarkSessions(ctx context.Context, sessions []string, bits dirty.Mask) error
}

// liveSettings reads the node's copy of the live settings.
type liveSettings interface {
	Int(key string) int
	Float(key string) float64
	String(key string) string
}

var (
	_ chatSeats    = (*rooms.Seats)(nil)
	_ chatMessages = (*rooms.Messages)(nil)
	_ lobbyLister  = (*rooms.Lobbies)(nil)
	_ readMarks    = (*rooms.ReadMarks)(nil)
	_ playerList   = (*rooms.Private)(nil)
	_ chatPresence = (*presence.Presence)(nil)
	_ cursors      = (*dirty.Tracker)(nil)
)

// MatchLobbyPrefix starts the lobby of every match's private room
// (matchmaking.MatchLobby): a lobby join under it is refused.
const MatchLobbyPrefix = "mm."

// leaseReleaser gives a connection lease back (package sessions).
type leaseReleaser interface {
	ReleaseConn(ctx context.Context, addr, id string)
}

// node is what chat needs of the core's Node: ids unique to the node's
// run, its owned goroutines, its drain, the presence rewrite its heartbeat
// asks for, and its pub/sub (a session's channel).
type node interface {
	RunID() string
	NextID() uint64
	Go(fn func(ctx context.Context)) bool
	Draining() <-chan struct{}
	TakeFresh() bool
	MarkFresh()
	Follow(ctx context.Context, channel string, h bus.Handler) (*bus.Subscription, error)
	Publish(ctx context.Context, channel string, message any) error
}

var _ node = (*realtime.Node)(nil)

// Chat is the chat use case: join, say, leave, resume, typing and read
// marks, for WebSocket clients and REST sessions alike, with one rule for
// each (a REST post is a say batch of one; a REST join and a WebSocket join
// are the same seat claim), and the side effects they own: presence, the
// REST members' dirty marks, the seat renewals that keep a connection's
// seats. It also answers the reads that go with chat (rooms, history,
// lobbies, presence, unread counts).
type Chat struct {
	node     string
	core     node
	presence chatPresence
	cursors  cursors
	settings liveSettings
	hub      *realtime.Hub
	marks    realtime.Marks
	rest     *restState
	mod      *realtime.Moderated
	caps     *realtime.Caps
	notices  *realtime.Notices
	now      func() time.Time
	log      *slog.Logger
	draining <-chan struct{}

	// the rooms parts chat uses
	seats     chatSeats
	messages  chatMessages
	lobbies   lobbyLister
	readMarks readMarks
	players   playerList

	maxConnsPerUser int
	leases          leaseReleaser
	names           nameKeeper
	run             func(fn func(ctx context.Context)) bool // the node's loops
	prefix          string
	typing          throttle
	buckets         emptyBuckets
	pstate          presenceState
	hooks           *hooks.Hooks // the application's backend; nil = none (hooks.go)
	blocks          realtime.BlockLister
}

// Config is what the chat use case is built from: the core's parts and
// the domain services it uses, each through the interface it declares.
type Config struct {
	// Node is this node's id. Required.
	Node string
	// Core is the realtime core (realtime.Node). Required.
	Core node
	// Hub is the core's registry of clients. Required.
	Hub *realtime.Hub
	// Notices delivers the notices a new connection's user has not seen.
	// Required.
	Notices *realtime.Notices
	// Marks are the core's coalesced dirty marks. Required.
	Marks realtime.Marks
	// Moderated refuses the says of a muted user. Required.
	Moderated *realtime.Moderated
	// Caps caps the new lobbies per user. Required.
	Caps *realtime.Caps
	// Seats, Messages, Lobbies, ReadMarks and Players are the rooms'
	// parts (package rooms). Required.
	Seats     chatSeats
	Messages  chatMessages
	Lobbies   lobbyLister
	ReadMarks readMarks
	Players   playerList
	// Presence, Cursors (the dirty tracker), Settings (the live settings)
	// and Names (the guests' names) are domain services. Required.
	Presence chatPresence
	Cursors  cursors
	Settings liveSettings
	Names    nameKeeper
	// Leases takes a closed connection's lease back (package sessions);
	// nil = no connection leases.
	Leases leaseReleaser
	// MaxConnsPerUser bounds one user's realtime clients on this node;
	// 0 or negative = no bound (realtime.Config fills the node's default).
	MaxConnsPerUser int
	// Prefix namespaces the sessions' channels; "" = "chatd".
	Prefix string
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
	// Hooks is the application's backend (the join and publish hooks:
	// hooks.go); nil = none.
	Hooks *hooks.Hooks
	// Blocks reads the users a user blocks (package direct), whose
	// messages History leaves out for that user; nil = none left out.
	Blocks realtime.BlockLister
}

// New builds the chat use case; Start starts its loops.
func New(cfg Config) *Chat {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Chat{node: cfg.Node, core: cfg.Core, seats: cfg.Seats, messages: cfg.Messages, lobbies: cfg.Lobbies,
		readMarks: cfg.ReadMarks, players: cfg.Players, presence: cfg.Presence, cursors: cfg.Cursors, settings: cfg.Settings,
		hub: cfg.Hub, marks: cfg.Marks, rest: &restState{}, mod: cfg.Moderated, caps: cfg.Caps, notices: cfg.Notices,
		now: cfg.Now, log: cfg.Logger, draining: cfg.Core.Draining(), maxConnsPerUser: cfg.MaxConnsPerUser,
		prefix: cfg.Prefix, leases: cfg.Leases, names: cfg.Names, run: cfg.Core.Go, hooks: cfg.Hooks,
		blocks: cfg.Blocks}
}

// REST is the chat of REST sessions: their joins, leaves, typing, read
// marks, posts and event streams, and the renewal of their seats by the
// poll. It shares Chat's state and send path (a post is a say of a batch
// of one), so a rule of a say holds for both.
type REST struct{ ch *Chat }

// NewREST builds the REST half of ch.
func NewREST(ch *Chat) *REST { return &REST{ch: ch} }

// Reads are the chat's reads: history, rooms, lobbies, presence, unread
// counts, local connections. They change nothing.
type Reads struct{ ch *Chat }

// NewReads builds the reads of ch.
func NewReads(ch *Chat) *Reads { return &Reads{ch: ch} }

// keeper is the chat's background work, started by Chat.Start: seat
// renewal, and the presence of this node's users.
type keeper struct{ ch *Chat }

// CanConnect reports, before a transport is set up, whether user may open
// one more realtime connection on this node: the rule Connect enforces.
func (ch *Chat) CanConnect(user string) error {
	if max := ch.maxConnsPerUser; max > 0 && len(ch.hub.UserClients(user)) >= max {
		return fmt.Errorf("%w: at most %d", realtime.ErrTooManyConnections, max)
	}
	return nil
}

// Connect registers a realtime client of p writing through t (lease is
// its per-address connection lease from Sessions.AdmitConn, or ""), and
// sends it hello and the notices it has not seen. It returns
// ErrTooManyConnections when the user has MaxConnsPerUser clients on this
// node already, ErrDraining while the node shuts down.
func (ch *Chat) Connect(p realtime.Principal, lease string, t realtime.Transport) (*realtime.Client, error) {
	return ch.connect(p, lease, t)
}

// connect is Connect, for WebSocket clients and streams alike.
func (ch *Chat) connect(p realtime.Principal, lease string, t realtime.Transport) (*realtime.Client, error) {
	select {
	case <-ch.draining:
		return nil, realtime.ErrDraining
	default:
	}
	c, err := ch.hub.Register(t, p, realtime.ClientOptions{ID: ch.attachID("ws"), Lease: lease}, ch.maxConnsPerUser)
	if err != nil {
		return nil, err
	}
	c.SendEvent(protocol.Hello{User: p.User, Node: ch.node, Motd: ch.settings.String(settings.MOTD), Data: hookData(p.HookData)})
	ch.run(func(ctx context.Context) { ch.touchUser(ctx, p.User) }) // online at once
	ch.run(func(ctx context.Context) { ch.notices.DeliverUnseen(ctx, c) })
	return c, nil
}

// attachID is a fresh attachment id: unique per node run.
func (ch *Chat) attachID(kind string) string {
	return kind + ":" + ch.node + ":" + ch.core.RunID() + ":" + strconv.FormatUint(ch.core.NextID(), 36)
}

// Disconnect forgets a client whose connection ended: it leaves the hub and
// detaches from each room it was in. Only the client's own attachment goes:
// the seat stays while the user has another connection or REST session in
// the room, on this node or any other.
func (ch *Chat) Disconnect(ctx context.Context, c *realtime.Client) {
	c.Close(realtime.CloseNormal, "")
	if !ch.hub.Unregister(c) {
		return // disconnected already
	}
	for _, room := range c.Rooms() {
		ch.hub.Leave(room, c)
		ch.detach(ctx, room, c)
	}
	ch.touchUser(ctx, c.User())
	if ch.leases != nil {
		ch.leases.ReleaseConn(ctx, c.Principal().Addr, c.Lease())
	}
}

func (ch *Chat) detach(ctx context.Context, room string, c *realtime.Client) {
	freed, err := ch.seats.Detach(ctx, room, c.User(), c.ID())
	if err != nil && !errors.Is(err, rooms.ErrNotSeated) && !errors.Is(err, rooms.ErrUnknownRoom) {
		ch.log.Debug("detach", "room", room, "user", c.User(), "err", err)
		return
	}
	if freed {
		ch.marks.Room(room, dirty.Of(dirty.Rooms))
	}
}

// Join seats the client's user in lobby (or answers the room it holds
// there), makes this connection an attachment of the seat, and replays the
// latest messages before going live.
func (ch *Chat) Join(ctx context.Context, c *realtime.Client, lobby string) error {
	room, err := ch.join(ctx, c.Principal(), lobby, ch.wsAttach(c))
	if err != nil {
		return err
	}
	return ch.enter(ctx, c, room, "", "")
}

// join is the one seat claim of WebSocket and REST joins: the caps
// (seats per user, new lobbies per user per minute), then rooms.Seats.Join.
func (ch *Chat) join(ctx context.Context, p realtime.Principal, lobby string, att rooms.Attach) (rooms.Room, error) {
	if err := names.Lobby(lobby); err != nil {
		return rooms.Room{}, err
	}
	if strings.HasPrefix(lobby, MatchLobbyPrefix) {
		return rooms.Room{}, realtime.ErrMatchLobby
	}
	if err := ch.caps.AllowLobby(ctx, ch.seats, p.User, lobby); err != nil {
		return rooms.Room{}, err
	}
	if err := ch.joinHook(ctx, p, lobby); err != nil {
		return rooms.Room{}, err
	}
	room, err := ch.seats.Join(ctx, lobby, p.User, att)
	if err != nil {
		return rooms.Room{}, err
	}
	ch.marks.Room(room.ID, dirty.Of(dirty.Rooms))
	return room, nil
}

// Resume takes the client back into room after a disconnect: the seat is
// kept or taken back (if it lapsed and a seat is free) with this
// connection attached, and everything after the message id after is
// replayed (up to ResumeMax), page by page as the client reads, then live.
// after may be "" (the latest messages, like a join) or a message id in
// either form. It validates before any side effect.
func (ch *Chat) Resume(ctx context.Context, c *realtime.Client, room, after string) error {
	if after != "" {
		id, err := rooms.NormalizeID(after)
		if err != nil {
			return err
		}
		after = id
	}
	r, err := ch.claimRoom(ctx, room, c.User(), ch.wsAttach(c))
	if err != nil {
		return err
	}
	ch.marks.Room(room, dirty.Of(dirty.Rooms))
	if c.InRoom(room) {
		if after == "" {
			c.SendEvent(protocol.Joined{Room: protocol.Room(r)})
			return nil
		}
		ch.hub.Leave(room, c)
	}
	return ch.enter(ctx, c, r, after, "")
}

// enter takes c into the room's feed (realtime.Hub.Enter: history from
// after, "" = the latest, then live, no gap, no duplicate; floor as
// there): other nodes learn the user is here before the client hears it
// joined. A repeated join answers with the same room.
func (ch *Chat) enter(ctx context.Context, c *realtime.Client, room rooms.Room, after, floor string) error {
	already, err := ch.hub.Enter(ctx, c, room.ID, after, floor, func() {
		ch.touchUser(ctx, c.User())
		c.SendEvent(protocol.Joined{Room: protocol.Room(room)})
	})
	if already {
		c.SendEvent(protocol.Joined{Room: protocol.Room(room)})
	}
	return err
}

// Leave frees the user's seat in room (an explicit leave ends the seat for
// all the user's connections) and takes the client out of it.
func (ch *Chat) Leave(ctx context.Context, c *realtime.Client, room string) error {
	if err := ch.leave(ctx, c.Principal(), room); err != nil {
		return err
	}
	ch.leftRoom(c.User(), room, c)
	ch.touchUser(ctx, c.User())
	return nil
}

func (ch *Chat) leave(ctx context.Context, p realtime.Principal, room string) error {
	if _, _, err := rooms.ParseRoom(room); err != nil {
		return err
	}
	if err := ch.seats.Leave(ctx, room, p.User); err != nil && !errors.Is(err, rooms.ErrNotSeated) {
		return err
	}
	return nil
}

// leftRoom takes every client of user on this node out of room after an
// explicit leave (which ends the seat for all of them); each but the one
// that asked (by) hears "left". REST members are marked.
func (ch *Chat) leftRoom(user, room string, by *realtime.Client) {
	for _, c := range ch.hub.UserClients(user) {
		if !c.InRoom(room) {
			continue
		}
		ch.hub.Leave(room, c)
		if c != by {
			c.SendEvent(protocol.Left{Room: room})
		}
	}
	ch.marks.Room(room, dirty.Of(dirty.Rooms))
}

// Typing relays a typing indicator of the client's user to the room's
// other members on every node: never stored, at most one per user and room
// every TypingEvery (more are dropped silently). The client must be in the
// room.
func (ch *Chat) Typing(ctx context.Context, c *realtime.Client, room string) error {
	if !c.InRoom(room) {
		return rooms.ErrNotSeated
	}
	return ch.typingOf(ctx, c.User(), room)
}

func (ch *Chat) typingOf(ctx context.Context, user, room string) error {
	if !ch.typing.allow(user+"\x00"+room, ch.now()) {
		return nil
	}
	return ch.messages.PublishTyping(ctx, room, user)
}

// Read records that the user has read room up to message id (WebSocket
// and REST alike).
func (ch *Chat) Read(ctx context.Context, p realtime.Principal, room, id string) error {
	if err := ch.CanSee(ctx, Viewer{User: p.User}, room); err != nil {
		return err
	}
	return ch.readMarks.MarkRead(ctx, room, p.User, id)
}

// restAttach is the attachment of a REST session to its seats.
func restAttach(session string) rooms.Attach { return rooms.Attach{ID: "rest:" + session, REST: true} }

// wsAttach is c's attachment: bound to this node's run, which keeps it
// (renewSeats) and whose end ends it (package rooms, Attach.Run).
func (ch *Chat) wsAttach(c *realtime.Client) rooms.Attach {
	return rooms.Attach{ID: c.ID(), Run: ch.core.RunID()}
}

// History returns up to limit messages of room after the id after ("" =
// the latest) as v sees them: without the messages of users v's user
// blocks (an admin's view leaves none out). A page after an id is filled
// from further on in the history to limit, or to the room's end, so a
// page emptied by hidden messages never reads as the end of the room; the
// latest limit are the latest limit less the hidden ones. It returns
// rooms.ErrResumeGap, rooms.ErrUnknownRoom and Redis errors.
func (rd *Reads) History(ctx context.Context, v Viewer, room, after string, limit int) ([]rooms.Message, error) {
	ch := rd.ch
	msgs, err := ch.messages.History(ctx, room, after, limit)
	if err != nil || v.User == "" || ch.blocks == nil || len(msgs) == 0 {
		return msgs, err
	}
	list, err := ch.blocks.Blocks(ctx, v.User)
	if err != nil {
		return nil, err
	}
	bl := realtime.NewBlocks(list)
	out := bl.Messages(msgs)
	if after == "" || len(out) == len(msgs) || len(msgs) < limit {
		return out, nil
	}
	// hidden messages made room in a full page: read on after the last
	// message read, to fill it or reach the room's end, at least
	// fillPage at a time (a capped history is a few reads, whatever the
	// limit)
	for len(out) < limit {
		n := max(limit-len(out), fillPage)
		msgs, err = ch.messages.History(ctx, room, msgs[len(msgs)-1].ID, n)
		if err != nil {
			return nil, err
		}
		out = append(out, bl.Messages(msgs)...)
		if len(msgs) < n {
			break
		}
	}
	return out[:min(len(out), limit)], nil
}

// fillPage is the least a read that fills a history page past hidden
// messages asks for.
const fillPage = 100

// Room returns a room with its live members.
func (rd *Reads) Room(ctx context.Context, room string) (rooms.Room, error) {
	ch := rd.ch
	return ch.seats.Room(ctx, room)
}

// Rooms returns every room of a lobby that v may see (CanSee): none of a
// private lobby but to its players and the admins, as for a lobby that
// does not exist.
func (rd *Reads) Rooms(ctx context.Context, v Viewer, lobby string) ([]rooms.Room, error) {
	ch := rd.ch
	if err := names.Lobby(lobby); err != nil {
		return nil, err
	}
	if err := ch.CanSee(ctx, v, lobby+"-1"); err != nil {
		if errors.Is(err, rooms.ErrUnknownRoom) {
			return nil, nil
		}
		return nil, err
	}
	return ch.seats.Rooms(ctx, lobby)
}

// Lobbies returns the most populated lobbies.
func (rd *Reads) Lobbies(ctx context.Context, limit int) ([]rooms.LobbyInfo, error) {
	ch := rd.ch
	return ch.lobbies.List(ctx, limit)
}

// Presence returns a user's presence as v may see it: the private rooms
// v may not see (CanSee) are left out of its rooms.
func (rd *Reads) Presence(ctx context.Context, v Viewer, user string) (presence.Status, error) {
	ch := rd.ch
	if err := names.User(user); err != nil {
		return presence.Status{}, err
	}
	st, err := ch.presence.Get(ctx, user)
	if err != nil {
		return st, err
	}
	st.Rooms = ch.visibleRooms(ctx, v, st.Rooms)
	return st, nil
}

// Unread returns, for each room p's user is seated in (on any node, over
// WebSocket or REST), the messages after the user's last-read id, capped.
func (rd *Reads) Unread(ctx context.Context, p realtime.Principal) (map[string]int, error) {
	ch := rd.ch
	set := map[string]struct{}{}
	st, err := ch.presence.Get(ctx, p.User)
	if err != nil {
		return nil, err
	}
	for _, r := range st.Rooms {
		set[r] = struct{}{}
	}
	cur, err := ch.cursors.Cursors(ctx, p.Session)
	if err != nil {
		return nil, err
	}
	for r := range cur {
		set[r] = struct{}{}
	}
	list := make([]string, 0, len(set))
	for r := range set {
		list = append(list, r)
	}
	if len(list) == 0 {
		return map[string]int{}, nil
	}
	return ch.readMarks.Unread(ctx, p.User, list)
}

// Connections returns the number of user's realtime clients on this node.
func (rd *Reads) Connections(user string) int { return len(rd.ch.hub.UserClients(user)) }
