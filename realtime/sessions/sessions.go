// Package sessions is the identity use case of a chatd node: guest
// sign-in and sign-out, the check every request and connection of a
// session passes (not banned, a guest still holding its name), and the
// per-address and per-node caps of realtime connections, with the
// renewal of this node's connection leases. It owns no Redis keys: the
// names and the leases are package identity's; it shows how a cap that
// must hold across nodes is counted without a write per connection per
// renewal (a lease of a live run counts without renewal).
//
// It is built on the realtime core (realtime.Node) from what it declares:
// nameClaims and connLeases (package identity), banCheck (the core's
// realtime.Moderated), sessionCaps (realtime.Caps), clients (the Hub),
// ids (the node's run). Chat takes its ReleaseConn.
package sessions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/chatd/chatd/identity"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/settings"
)

// nameClaims is what the sessions use case needs of the guest-name
// registry.
type nameClaims interface {
	Admit(ctx context.Context, name, holder string, expires time.Time) error
	Claim(ctx context.Context, name, holder string) error
	Release(ctx context.Context, name, holder string, expires time.Time) error
	TTL() time.Duration
}

// connLeases counts realtime connections per client address across nodes.
type connLeases interface {
	Admit(ctx context.Context, addr, connID string, max int) (ok bool, err error)
	Renew(ctx context.Context, conns []identity.Conn) error
	Refresh(ctx context.Context, conns []identity.Conn) error
	Keep() time.Duration
	Release(ctx context.Context, addr, connID string) error
	Lease() time.Duration
}

// banCheck refuses a banned user (realtime.Moderated).
type banCheck interface {
	Banned(ctx context.Context, user string) error
}

// sessionCaps caps new sessions per client address (realtime.Caps).
type sessionCaps interface {
	AllowSession(ctx context.Context, addr string) error
}

// clients are this node's realtime clients (realtime.Hub).
type clients interface {
	Count() int
	Clients() []*realtime.Client
	CloseUser(user, holder string, code int, reason string)
}

// nodeRun is the node's run (ids unique to it, whether the live runs are
// known) and its loops (realtime.Node).
type nodeRun interface {
	RunID() string
	NextID() uint64
	LiveRuns() bool
	Go(fn func(ctx context.Context)) bool
}

// liveSettings are the live settings Sessions reads.
type liveSettings interface {
	Int(key string) int
}

var (
	_ nameClaims   = (*identity.Registry)(nil)
	_ connLeases   = (*identity.Conns)(nil)
	_ banCheck     = (*realtime.Moderated)(nil)
	_ sessionCaps  = (*realtime.Caps)(nil)
	_ clients      = (*realtime.Hub)(nil)
	_ nodeRun      = (*realtime.Node)(nil)
	_ liveSettings = (*settings.Store)(nil)
)

// Sessions is the identity use case: guest sign-in and sign-out, the check
// every request and connection of a session passes (not banned, a guest
// still holding its name), and the per-address and per-node connection
// caps of realtime connections.
type Sessions struct {
	names     nameClaims
	conns     connLeases
	mod       banCheck
	caps      sessionCaps
	settings  liveSettings
	hub       clients
	node      nodeRun
	now       func() time.Time
	log       *slog.Logger
	refreshed time.Time // when renewConns last refreshed the keys (its loop only)
}

// Config configures Sessions: the domain services and the parts of the
// core it is built from.
type Config struct {
	// Node is the realtime core: its Hub, its run and its loops. Required.
	Node *realtime.Node
	// Names is the guest-name registry, Conns the connection leases per
	// client address (package identity). Required.
	Names nameClaims
	Conns connLeases
	// Moderated refuses a banned user, Caps caps the new sessions per
	// address (the core's). Required.
	Moderated banCheck
	Caps      sessionCaps
	// Settings are the live settings. Required.
	Settings liveSettings
	// Now is the clock; nil = time.Now.
	Now func() time.Time
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
}

// New builds the sessions use case on the core's name registry,
// connection leases, moderation statuses and caps. Start starts its loop.
func New(cfg Config) *Sessions {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Sessions{names: cfg.Names, conns: cfg.Conns, mod: cfg.Moderated, caps: cfg.Caps, settings: cfg.Settings,
		hub: cfg.Node.Hub(), node: cfg.Node, now: cfg.Now, log: cfg.Logger}
}

// SignIn signs a guest in as name from client address addr and returns the
// holder id the new session's token must carry. A free name is claimed for
// a new holder; a name in use answers ErrNameTaken, unless prev is a live
// session of that same guest (a second device or tab: the new session
// joins the holder), whatever the case of name (names compare canonically:
// the caller keeps the guest's display name, prev.User). Sessions per
// client address per minute are capped.
func (s *Sessions) SignIn(ctx context.Context, addr, name string, prev *realtime.Principal) (holder string, err error) {
	if err := names.User(name); err != nil {
		return "", err
	}
	if err := s.caps.AllowSession(ctx, addr); err != nil {
		return "", err
	}
	if err := s.mod.Banned(ctx, name); err != nil {
		return "", err
	}
	if prev != nil && names.Canonical(prev.User) == names.Canonical(name) && prev.Holder != "" {
		if err := s.Admit(ctx, *prev); err != nil {
			return "", err
		}
		return prev.Holder, nil
	}
	holder, err = randomID()
	if err != nil {
		return "", err
	}
	if err := s.names.Claim(ctx, name, holder); err != nil {
		if errors.Is(err, identity.ErrNameTaken) {
			return "", fmt.Errorf("%w: the name %q is in use by another guest; pick another, or wait until that guest signs out or is idle for %s",
				realtime.ErrNameTaken, name, realtime.HumanDuration(s.names.TTL()))
		}
		return "", err
	}
	return holder, nil
}

// SignOut ends a guest session everywhere at once: the name is free again,
// the holder is revoked until its token expires (it can never take the
// name back), and every node closes the guest's connections (4000) when
// the registry's event reaches it — this one at once.
func (s *Sessions) SignOut(ctx context.Context, p realtime.Principal) error {
	if p.Holder != "" {
		if err := s.names.Release(ctx, p.User, p.Holder, p.Expires); err != nil {
			return err
		}
	}
	s.hub.CloseUser(p.User, p.Holder, realtime.CloseSessionEnded, "signed out")
	return nil
}

// Admit checks a verified session: the user is not banned, and a guest's
// name is still its holder's — renewed (activity keeps a guest name), or
// taken back when it is free, so a Redis that lost its data costs nobody
// their session; a signed-out holder or one whose name another guest took
// is refused (bad_token). Both answers come from caches most of the time,
// caches that every sign-out and takeover clears on every node at once.
func (s *Sessions) Admit(ctx context.Context, p realtime.Principal) error {
	if err := s.mod.Banned(ctx, p.User); err != nil {
		return err
	}
	if p.Holder == "" {
		return nil // a token of the operator's login service
	}
	return s.names.Admit(ctx, p.User, p.Holder, p.Expires)
}

// AdmitConn counts a new realtime connection from addr against
// limit.connections_per_ip across all nodes and limit.connections_per_node
// here, and returns its lease id, or ErrTooManyFromAddr / ErrNodeFull. Give
// the id to Chat.Connect; Chat.Disconnect releases it (ReleaseConn, if the
// connection does not open). A Redis error admits (the cap is a guard, not
// a dependency): the id is then "".
func (s *Sessions) AdmitConn(ctx context.Context, addr string) (string, error) {
	if max := s.settings.Int(settings.ConnectionsPerNode); max > 0 && s.hub.Count() >= max {
		return "", fmt.Errorf("%w: this node holds %d, its most; reconnect (the balancer may pick another node)", realtime.ErrNodeFull, max)
	}
	id := realtime.ConnRun(s.node.RunID()) + "-" + strconv.FormatUint(s.node.NextID(), 36)
	max := s.settings.Int(settings.ConnectionsPerIP)
	ok, err := s.conns.Admit(ctx, addr, id, max)
	if err != nil {
		s.log.Debug("admit connection", "addr", addr, "err", err)
		return "", nil
	}
	if !ok {
		return "", fmt.Errorf("%w: at most %d open connections from one address across all nodes", realtime.ErrTooManyFromAddr, max)
	}
	return id, nil
}

// ReleaseConn gives back a connection lease of addr.
func (s *Sessions) ReleaseConn(ctx context.Context, addr, id string) {
	if id == "" {
		return
	}
	if err := s.conns.Release(ctx, addr, id); err != nil {
		s.log.Debug("release connection", "addr", addr, "err", err)
	}
}

// Start starts the renewal of this node's connection leases, on the
// node's loops (Node.Shutdown stops it).
func (s *Sessions) Start(context.Context) error {
	s.node.Go(func(ctx context.Context) {
		realtime.Every(ctx, s.now, func() time.Duration { return s.conns.Lease() / 3 }, s.renewConns)
	})
	return nil
}

// renewConns renews the per-address connection leases of this node's
// clients, in one pipeline, when the live runs are not known (the node
// registry did not answer lately). While they are, a lease of this node's
// live run counts without renewal (identity.ConnsConfig.Live): only the
// addresses' keys are kept, one PEXPIRE per address every Keep/3.
func (s *Sessions) renewConns(ctx context.Context) {
	known := s.node.LiveRuns()
	now := s.now()
	if known && now.Sub(s.refreshed) < s.conns.Keep()/3 {
		return
	}
	var cs []identity.Conn
	for _, c := range s.hub.Clients() {
		if l := c.Lease(); l != "" {
			cs = append(cs, identity.Conn{Addr: c.Principal().Addr, ID: l})
		}
	}
	if len(cs) == 0 {
		return
	}
	if known {
		if err := s.conns.Refresh(ctx, cs); err != nil {
			s.log.Debug("refresh connection keys", "err", err)
			return
		}
		s.refreshed = now
		return
	}
	if err := s.conns.Renew(ctx, cs); err != nil {
		s.log.Debug("renew connection leases", "err", err)
	}
}

// randomID is a fresh 96-bit id, hex-encoded.
func randomID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
