package chat

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/presence"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/rooms"
	"github.com/chatd/chatd/settings"
)

// The seat and presence loops of the chat use case: what keeps a
// connection's seats and its user's presence while it is open, and takes
// a seat lost by lease back while the connection still shows the room.

// nameKeeper renews a guest's claim of its name while a connection is
// open (package identity): AdmitMany renews each, or takes it back if it
// is free (a Redis that lost its data), or refuses a holder that signed
// out or whose name another guest took, the ones Redis must answer
// pipelined.
type nameKeeper interface {
	AdmitMany(ctx context.Context, as []identity.Admission) []error
}

var _ nameKeeper = (*identity.Registry)(nil)

func (ch *Chat) lease() time.Duration {
	return time.Duration(ch.settings.Int(settings.SeatLeaseSeconds)) * time.Second
}

// Start starts the chat loops on the node's: seat renewal every third of
// the lease, presence every third of its TTL. Node.Shutdown stops them.
func (ch *Chat) Start(context.Context) error {
	kp := &keeper{ch: ch}
	ch.run(func(ctx context.Context) {
		realtime.Every(ctx, ch.now, func() time.Duration { return ch.lease() / 3 }, kp.renewSeats)
	})
	ch.run(func(ctx context.Context) {
		realtime.Every(ctx, ch.now, func() time.Duration { return ch.presence.TTL() / 3 }, func(ctx context.Context) { kp.touchPresence(ctx, ch.names) })
	})
	return nil
}

// renewSeats keeps every attachment of this node's clients, all bound to
// the node's run, with one run lease per lobby (rooms.Seats.KeepRun: one
// pipelined round trip, whose cost grows with the lobbies, not the
// attachments); an attachment that is gone — the run's lease ran out
// during a pause, or a seat was taken away — is taken back if it can be,
// or its client is told (not_seated, naming the room).
func (kp *keeper) renewSeats(ctx context.Context) {
	ch := kp.ch
	atts := ch.hub.LocalSeats()
	if len(atts) == 0 {
		return
	}
	lost, err := ch.seats.KeepRun(ctx, ch.core.RunID(), atts)
	if err != nil {
		ch.log.Debug("renew seats", "err", err)
		return
	}
	for _, a := range lost {
		for _, c := range ch.hub.UserClients(a.User) {
			if c.ID() != a.ID {
				continue
			}
			_, err := ch.seats.Reclaim(ctx, a.Room, a.User, ch.wsAttach(c))
			if err == nil {
				continue
			}
			ch.hub.Leave(a.Room, c)
			if errors.Is(err, rooms.ErrUnknownRoom) {
				// Redis lost the room with its data (FLUSHALL, a failover
				// to a replica that had not synced it): the seat cannot be
				// taken back, and nothing more is sent to the room.
				ch.log.Warn("room lost with Redis's data: member told to join again", "room", a.Room, "user", a.User)
				c.SendError(errcode.NotSeated, "the room "+a.Room+" no longer exists (the server lost its data); join the lobby again", a.Room, "")
				continue
			}
			c.SendError(errcode.NotSeated, "your seat in "+a.Room+" expired and was taken; join the lobby again", a.Room, "")
		}
	}
}

// RenewPoll renews a polling session's seats and its user's presence, at
// most once per third of the seat lease per session on this node (so a
// clean poll stays one Redis command).
func (rt *REST) RenewPoll(ctx context.Context, p realtime.Principal) {
	if rt.ch.rest.renewed.due(p.Session, rt.ch.now(), rt.ch.lease()/3) {
		rt.renewREST(ctx, p)
	}
}

// renewREST renews the seats of a polling session's rooms and its user's
// presence (a REST user in no room is online too). A seat that lapsed (the
// session did not poll within the lease) is dropped from the session's rooms
// and its rooms bit set, so this very poll tells the client to join again.
func (rt *REST) renewREST(ctx context.Context, p realtime.Principal) {
	ch := rt.ch
	cur, err := ch.cursors.Cursors(ctx, p.Session)
	if err != nil {
		ch.log.Debug("read REST rooms", "err", err)
		return
	}
	atts := make([]rooms.Attachment, 0, len(cur))
	id := restAttach(p.Session).ID
	for room := range cur {
		atts = append(atts, rooms.Attachment{Room: room, User: p.User, ID: id})
	}
	held := make([]string, 0, len(cur))
	if len(atts) > 0 {
		lost, err := ch.seats.Renew(ctx, atts)
		if err != nil {
			ch.log.Debug("renew REST seats", "err", err)
			lost = nil
		}
		gone := map[string]bool{}
		for _, a := range lost {
			gone[a.Room] = true
			if err := ch.cursors.DropCursor(ctx, p.Session, a.Room); err != nil {
				ch.log.Debug("drop lapsed REST room", "err", err)
			}
		}
		if len(gone) > 0 {
			if err := ch.cursors.MarkSessions(ctx, []string{p.Session}, dirty.Of(dirty.Rooms)); err != nil {
				ch.log.Debug("mark lapsed REST room", "err", err)
			}
		}
		for _, a := range atts {
			if !gone[a.Room] {
				held = append(held, a.Room)
			}
		}
	}
	ch.rest.sessions.put(p.User, p.Session, held, ch.now(), p.Guest())
	ch.touchUser(ctx, p.User)
}

// presenceRefreshTicks is how many presence ticks a full rewrite of every
// user's claim is spread over (at the default 10 s tick, half an hour):
// claims live with the node's run (package presence), so a
// user's claim is written when its rooms or connections change, and this
// slow rotation only heals a write that was lost (a partial failover).
const presenceRefreshTicks = 180

// onlineSlices is how many presence ticks the online index's renewal is
// spread over: each tick KeepOnline writes a third of the users (and the
// ones new since the last tick), each entry living presence's OnlineTTL,
// so every user is written once per TTL (package presence, KeepOnline).
const onlineSlices = 3

// presenceState is the presence loop's memory: the users it kept online
// at its last tick, the tick count, whether everything must be written
// again, the users whose write failed, and the stripes that order the
// writes of one user.
type presenceState struct {
	mu    sync.Mutex
	retry map[string]struct{} // users whose touch failed: rewritten next tick
	// offline holds the users whose offline this node wrote since the
	// last tick, and has not written online since: the tick does not
	// write them offline again (a departed WebSocket's Disconnect did).
	offline map[string]struct{}

	seen  map[string]struct{} // only the presence loop touches it
	tick  atomic.Uint64       // ticks done
	fulls atomic.Uint64       // ticks that wrote every user

	stripes [64]sync.Mutex // one user's writes, in order
}

func (ps *presenceState) stripe(user string) *sync.Mutex {
	return &ps.stripes[maphash.String(presenceSeed, user)%uint64(len(ps.stripes))]
}

var presenceSeed = maphash.MakeSeed()

// failed queues user for a rewrite at the next tick.
func (ps *presenceState) failed(user string) {
	ps.mu.Lock()
	if ps.retry == nil {
		ps.retry = map[string]struct{}{}
	}
	ps.retry[user] = struct{}{}
	ps.mu.Unlock()
}

// wrote records what touchUser last wrote for user: offline, or online.
func (ps *presenceState) wrote(user string, offline bool) {
	ps.mu.Lock()
	if offline {
		if ps.offline == nil {
			ps.offline = map[string]struct{}{}
		}
		ps.offline[user] = struct{}{}
	} else {
		delete(ps.offline, user)
	}
	ps.mu.Unlock()
}

// touchPresence runs every presence tick. It keeps the users with a
// client or a recently polling REST session on this node in the online
// index (KeepOnline: one command per 1,000 users; a third of them each
// tick, and those new since the last one), and writes whole claims
// only for the users that need it: all of them after a fresh heartbeat
// (Redis lost them, or the node lapsed), those whose last write failed,
// and a 1/presenceRefreshTicks slice in rotation. A user that is no
// longer here (its REST session stopped polling) is written offline. It
// also renews the names of the guests with an open connection (an open
// WebSocket is activity; package identity answers from memory within a
// quarter of the name's TTL).
func (kp *keeper) touchPresence(ctx context.Context, keeper nameKeeper) {
	ch := kp.ch
	ps := &ch.pstate
	if keeper != nil {
		var guests []*realtime.Client
		var as []identity.Admission
		for _, c := range ch.hub.Clients() {
			if p := c.Principal(); p.Holder != "" {
				guests = append(guests, c)
				as = append(as, identity.Admission{Name: p.User, Holder: p.Holder, Expires: p.Expires})
			}
		}
		// pipelined: one round trip for 64 guests, not one each
		for i, err := range keeper.AdmitMany(ctx, as) {
			if errors.Is(err, identity.ErrNotHolder) || errors.Is(err, identity.ErrSignedOut) {
				guests[i].Close(realtime.CloseSessionEnded, realtime.ClipRunes(errcode.Message(err), 120))
			}
		}
	}
	full := ch.core.TakeFresh()
	if full {
		ps.fulls.Add(1)
	}
	ps.mu.Lock()
	retry := ps.retry
	ps.retry = nil
	ps.mu.Unlock()
	tick := ps.tick.Load()
	defer ps.tick.Add(1)

	// Whole claims are written under every stripe, from a snapshot taken
	// under them: a touchUser of the same user cannot interleave.
	for i := range ps.stripes {
		ps.stripes[i].Lock()
	}
	byUser, conns, guests := kp.localPresence()
	// Taken under the stripes with byUser: an offline recorded here was
	// written before this snapshot, and an online write since is not
	// (touchUser records under the user's stripe).
	ps.mu.Lock()
	offline := ps.offline
	ps.offline = nil
	ps.mu.Unlock()
	var write []presence.UserState
	keep := make([]string, 0, len(byUser)/onlineSlices+1)
	for u, rs := range byUser {
		_, again := retry[u]
		_, was := ps.seen[u]
		h := maphash.String(presenceSeed, u)
		if full || again || !was || h%onlineSlices == tick%onlineSlices {
			keep = append(keep, u)
		}
		if full || again || h%presenceRefreshTicks == tick%presenceRefreshTicks {
			st := userState(u, rs)
			st.Conns = conns[u]
			st.Guest = guests[u]
			write = append(write, st)
		}
	}
	if len(write) > 0 {
		if err := ch.presence.Touch(ctx, ch.node, write); err != nil {
			ch.log.Debug("presence touch", "users", len(write), "err", err)
			if full {
				ch.core.MarkFresh()
			}
			for _, st := range write {
				ps.failed(st.User)
			}
		}
	}
	for i := range ps.stripes {
		ps.stripes[i].Unlock()
	}
	// Offline, unless they came back meanwhile: the users here at the last
	// tick and gone now, but those written offline since (a WebSocket's
	// Disconnect does it at once: writing them again cost a script call
	// each, for every user that left), and the users whose write failed
	// and who are not here (a client that came and went within one tick,
	// whose offline write failed, was in no tick's snapshot).
	gone := map[string]struct{}{}
	for u := range ps.seen {
		_, here := byUser[u]
		_, done := offline[u]
		if !here && !done {
			gone[u] = struct{}{}
		}
	}
	for u := range retry {
		if _, here := byUser[u]; !here {
			gone[u] = struct{}{}
		}
	}
	for u := range gone {
		ch.touchUser(ctx, u)
	}
	ps.seen = make(map[string]struct{}, len(byUser))
	for u := range byUser {
		ps.seen[u] = struct{}{}
	}
	if err := ch.presence.KeepOnline(ctx, keep); err != nil {
		ch.log.Debug("presence keep online", "users", len(keep), "err", err)
	}
}

// localPresence is every user with a client or a recently polling REST
// session here: its rooms, its connections, and whether it is a guest, all
// from one snapshot (a guest whose connection ends meanwhile is still
// written as the guest it was).
func (kp *keeper) localPresence() (map[string]map[string]struct{}, map[string][]presence.Conn, map[string]bool) {
	ch := kp.ch
	byUser := map[string]map[string]struct{}{}
	add := func(user string, rs []string) {
		m := byUser[user]
		if m == nil {
			m = map[string]struct{}{}
			byUser[user] = m
		}
		for _, r := range rs {
			m[r] = struct{}{}
		}
	}
	conns := map[string][]presence.Conn{}
	guests := map[string]bool{}
	for _, c := range ch.hub.Clients() {
		p := c.Principal()
		add(p.User, c.Rooms())
		conns[p.User] = append(conns[p.User], connOf(c))
		guests[p.User] = guests[p.User] || p.Guest()
	}
	for user, ru := range ch.rest.sessions.all(ch.now(), ch.lease()) {
		add(user, ru.rooms)
		guests[user] = guests[user] || ru.guest
	}
	return byUser, conns, guests
}

// touchUser writes this node's presence claim for user now: the rooms of
// its local clients and REST sessions, or offline when it has none here.
// A write that fails is done again at the next presence tick.
func (ch *Chat) touchUser(ctx context.Context, user string) {
	mu := ch.pstate.stripe(user)
	mu.Lock()
	defer mu.Unlock()
	set := map[string]struct{}{}
	cs := ch.hub.UserClients(user)
	for _, c := range cs {
		for _, r := range c.Rooms() {
			set[r] = struct{}{}
		}
	}
	rest, restHere := ch.rest.sessions.of(user, ch.now(), ch.lease())
	for _, r := range rest.rooms {
		set[r] = struct{}{}
	}
	if len(cs) == 0 && !restHere {
		if err := ch.presence.Offline(ctx, user, ch.node); err != nil {
			ch.log.Debug("presence offline", "user", user, "err", err)
			ch.pstate.failed(user)
			return
		}
		ch.pstate.wrote(user, true)
		return
	}
	ch.pstate.wrote(user, false)
	// Whether the user is a guest comes from the same look as its clients
	// and sessions: asked again now, a guest whose connection just ended
	// would be written unmarked, its record kept 30 days, not GuestTTL.
	st := userState(user, set)
	st.Guest = rest.guest
	for _, c := range cs {
		st.Conns = append(st.Conns, connOf(c))
		st.Guest = st.Guest || c.Principal().Guest()
	}
	if err := ch.presence.Touch(ctx, ch.node, []presence.UserState{st}); err != nil {
		ch.log.Debug("presence touch", "user", user, "err", err)
		ch.pstate.failed(user)
	}
}

// connOf is c as the presence lists it.
func connOf(c *realtime.Client) presence.Conn {
	return presence.Conn{ID: c.ID(), Session: c.Principal().Session}
}

// userState is user's presence with the set of rooms.
func userState(user string, set map[string]struct{}) presence.UserState {
	st := presence.UserState{User: user, Rooms: make([]string, 0, len(set))}
	for r := range set {
		st.Rooms = append(st.Rooms, r)
	}
	return st
}
