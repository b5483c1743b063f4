// Package direct is the direct-message use case of a chatd node: opening
// a conversation with another user, sending to it, typing, read marks,
// history and the list of one's conversations, over WebSocket, REST and
// the event stream alike; blocks; the admins' audited reads and removals;
// and the delivery of every direct event to each connection of its users
// on this node, with the resume of a conversation after a reconnect on
// any node, nothing missed or doubled (deliver.go).
//
// It owns no Redis keys (package direct owns them). It is built on the
// realtime core from what it declares: store (package direct), clients
// (the core's Hub), marks (realtime.Marks), muteCheck
// (realtime.Moderated), limits (the live settings) and node (the bus and
// the loops). Match asks it whether a party invitation may reach its
// invitee (CheckReach).
//
// The rules, each in one place here: a conversation is opened by an
// explicit open or by the first message; either user blocking the other
// refuses an open, a send, typing and a party invitation with the code
// blocked; a block's change reaches the blocker's connections on every
// node, whose rooms then keep the blocked user's messages and typing from
// them (the core's Client.SetBlocks; deliver.go); only the pair reads a conversation (anyone else, an id or a
// name alike, is not_found); a muted user cannot send; a user's budget of
// new conversations and per-conversation send rate bound what one client
// can make Redis keep.
package direct

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	dm "github.com/chatd/chatd/direct"
	"github.com/chatd/chatd/dirty"
	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/bus"
	"github.com/chatd/chatd/names"
	"github.com/chatd/chatd/protocol"
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/settings"
)

// store is what the use case needs of package direct.
type store interface {
	ConversationID(a, b string) string
	Open(ctx context.Context, from, to string, o dm.OpenOptions) (dm.Conversation, bool, error)
	Get(ctx context.Context, id string) (dm.Conversation, error)
	Send(ctx context.Context, conv dm.Conversation, from, text string, o dm.SendOptions) (dm.Sent, error)
	History(ctx context.Context, conv dm.Conversation, after string, limit int) (dm.Page, error)
	Before(ctx context.Context, conv dm.Conversation, before string, limit int) ([]dm.Message, error)
	MarkRead(ctx context.Context, conv dm.Conversation, user, id string) (int64, error)
	List(ctx context.Context, user string, limit int) ([]dm.Summary, error)
	Remove(ctx context.Context, conv dm.Conversation, id string) (bool, error)
	Block(ctx context.Context, user, target string, o dm.BlockOptions) error
	Unblock(ctx context.Context, user, target string) error
	Blocks(ctx context.Context, user string) ([]string, error)
	CheckReach(ctx context.Context, from, to string) error
	Publish(ctx context.Context, users []string, frame []byte) error
	Channel() string
}

// clients are this node's clients by user (realtime.Hub), and their
// block sets read again after the bus was away.
type clients interface {
	UserClients(user string) []*realtime.Client
	ReloadBlocks(ctx context.Context)
}

// marks marks a user's poll sections dirty (realtime.Marks).
type marks interface {
	User(user string, bits dirty.Mask)
}

// muteCheck refuses a muted user's send (realtime.Moderated).
type muteCheck interface {
	Muted(ctx context.Context, user string) error
}

// limits are the live settings a send follows (settings.Store).
type limits interface {
	Int(key string) int
	Float(key string) float64
}

// node is the node's bus and loops (realtime.Node).
type node interface {
	Subscribe(ctx context.Context, channel string, h bus.Handler) error
	Go(fn func(ctx context.Context)) bool
}

var (
	_ store     = (*dm.Service)(nil)
	_ clients   = (*realtime.Hub)(nil)
	_ marks     = realtime.Marks{}
	_ muteCheck = (*realtime.Moderated)(nil)
	_ limits    = (*settings.Store)(nil)
	_ node      = (*realtime.Node)(nil)
)

// Config configures the use case. Store, Clients, Marks, Muted, Limits and
// Node are required.
type Config struct {
	Store   store
	Clients clients
	Marks   marks
	Muted   muteCheck
	Limits  limits
	Node    node
	// Logger receives the logs; nil = slog.Default().
	Logger *slog.Logger
}

// Direct is the direct-message use case.
type Direct struct {
	store  store
	hub    clients
	marks  marks
	muted  muteCheck
	limits limits
	node   node
	log    *slog.Logger

	mu     sync.Mutex
	states map[*realtime.Client]*clientState // deliver.go
}

// New builds the use case; Start subscribes it to the direct channel.
func New(cfg Config) (*Direct, error) {
	if cfg.Store == nil || cfg.Clients == nil || cfg.Marks == nil || cfg.Muted == nil || cfg.Limits == nil || cfg.Node == nil {
		return nil, errors.New("direct: Config.Store, Clients, Marks, Muted, Limits and Node are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Direct{store: cfg.Store, hub: cfg.Clients, marks: cfg.Marks, muted: cfg.Muted, limits: cfg.Limits,
		node: cfg.Node, log: cfg.Logger, states: map[*realtime.Client]*clientState{}}, nil
}

// Start subscribes to the direct channel: an event published on any node
// reaches this node's connections of its users.
func (d *Direct) Start(ctx context.Context) error {
	if err := d.node.Subscribe(ctx, d.store.Channel(), bus.HandlerFuncs{OnReceive: d.receive, OnResubscribed: d.resubscribed}); err != nil {
		return fmt.Errorf("direct: subscribe: %w", err)
	}
	return nil
}

// resolve returns the conversation p addresses by with — the other
// user's name or the conversation's id — when it exists and p's user is
// one of its pair; else dm.ErrNoConversation (an outsider learns nothing).
func (d *Direct) resolve(ctx context.Context, p realtime.Principal, with string) (dm.Conversation, error) {
	id := with
	if !dm.IsConversationID(with) {
		if err := names.User(with); err != nil {
			return dm.Conversation{}, err
		}
		id = d.store.ConversationID(p.User, with)
	}
	conv, err := d.store.Get(ctx, id)
	if err != nil {
		return dm.Conversation{}, err
	}
	if !conv.Has(p.User) {
		return dm.Conversation{}, dm.ErrNoConversation
	}
	return conv, nil
}

// Open opens (or finds) the conversation of p's user with with (a user
// name, or the id of a conversation p's user is in). It returns
// dm.ErrBlocked when either blocks the other, dm.ErrNoConversation,
// names.ErrBadName, dm.ErrSelf, a *dm.RateLimitError when the budget of
// new conversations is spent, and Redis errors.
func (d *Direct) Open(ctx context.Context, p realtime.Principal, with string) (dm.Conversation, error) {
	if dm.IsConversationID(with) {
		conv, err := d.resolve(ctx, p, with)
		if err != nil {
			return dm.Conversation{}, err
		}
		with = conv.Peer(p.User)
	}
	conv, created, err := d.store.Open(ctx, p.User, with, dm.OpenOptions{Guest: p.Guest()})
	if err != nil {
		return dm.Conversation{}, err
	}
	if created {
		d.markBoth(conv)
	}
	return conv, nil
}

// Send sends text from p's user in the conversation with with (a user
// name, which opens the conversation if need be, or a conversation id).
// ref is the client's idempotency key ("" = none): a repeat within the
// store's SaidTTL answers the first message (Repeated) and changes
// nothing. The Redis client's retry of the store's script after a lost
// reply, keyed or not, is this send, not a repeat (dm.Service.Send): the
// answer is the first run's message, not Repeated, and the pair is marked
// as for any new message. It returns Open's errors, realtime's muted
// refusal, realtime.ErrEmptyText, *realtime.TooLongError,
// dm.ErrRefReused, a *dm.RateLimitError, and Redis errors.
func (d *Direct) Send(ctx context.Context, p realtime.Principal, with, text, ref string) (dm.Sent, error) {
	if text == "" {
		return dm.Sent{}, realtime.ErrEmptyText
	}
	if !utf8.ValidString(text) {
		return dm.Sent{}, realtime.ErrBadUTF8
	}
	if mx, got := min(d.limits.Int(settings.MessageMaxLength), dm.MaxText), utf8.RuneCountInString(text); got > mx || len(text) > dm.MaxText {
		return dm.Sent{}, &realtime.TooLongError{Max: mx, Got: got}
	}
	if err := d.muted.Muted(ctx, p.User); err != nil {
		return dm.Sent{}, err
	}
	conv, err := d.Open(ctx, p, with)
	if err != nil {
		return dm.Sent{}, err
	}
	rate := d.limits.Float(settings.RateMessagesPerSecond)
	sent, err := d.store.Send(ctx, conv, p.User, text, dm.SendOptions{Ref: idemKey(p.Session, ref), Rate: rate,
		Burst: int(max(rate, 1)) * 2, Guest: p.Guest()})
	if err != nil {
		return dm.Sent{}, err
	}
	if !sent.Repeated { // a client's repeat: the first send marked them
		d.markBoth(conv)
	}
	return sent, nil
}

// Typing tells the other one of the pair that p's user is typing (a
// dm_typing event on their connections); nothing is stored. It returns
// dm.ErrNoConversation, dm.ErrBlocked and Redis errors.
func (d *Direct) Typing(ctx context.Context, p realtime.Principal, with string) error {
	conv, err := d.resolve(ctx, p, with)
	if err != nil {
		return err
	}
	peer := conv.Peer(p.User)
	if err := d.store.CheckReach(ctx, p.User, peer); err != nil {
		return err
	}
	frame, err := protocol.Encode(protocol.DMTypingEvent{Conversation: conv.ID, From: p.User, TS: time.Now().UnixMilli()})
	if err != nil {
		return err
	}
	return d.store.Publish(ctx, []string{peer}, frame)
}

// Read marks the conversation read by p's user up to message id and
// returns the unread count after; p's user's connections are told (a
// dm_read event: their badges follow). It returns dm.ErrNoConversation,
// dm.ErrBadID and Redis errors.
func (d *Direct) Read(ctx context.Context, p realtime.Principal, with, id string) (dm.Conversation, int64, error) {
	conv, err := d.resolve(ctx, p, with)
	if err != nil {
		return dm.Conversation{}, 0, err
	}
	n, err := d.store.MarkRead(ctx, conv, p.User, id)
	if err != nil {
		return dm.Conversation{}, 0, err
	}
	nid, _ := dm.NormalizeID(id)
	frame, err := protocol.Encode(protocol.DMReadEvent{Conversation: conv.ID, User: p.User, ID: nid, Unread: n})
	if err != nil {
		return conv, n, err
	}
	if err := d.store.Publish(ctx, []string{p.User}, frame); err != nil {
		return conv, n, err
	}
	d.marks.User(p.User, dirty.Of(dirty.Direct))
	return conv, n, nil
}

// History returns a page of the conversation after the id after (""
// = the latest limit). It returns dm.ErrNoConversation, dm.ErrBadID and
// Redis errors.
func (d *Direct) History(ctx context.Context, p realtime.Principal, with, after string, limit int) (dm.Conversation, dm.Page, error) {
	conv, err := d.resolve(ctx, p, with)
	if err != nil {
		return dm.Conversation{}, dm.Page{}, err
	}
	page, err := d.page(ctx, conv, after, limit)
	return conv, page, err
}

// MaxPageBytes bounds a page of history's messages as JSON: a page after
// an id that would be larger ends early, with More set (ask again after
// its last id); the latest page keeps the newest messages that fit.
const MaxPageBytes = 1 << 20

// pageStep is how many messages one Redis read of a page asks for: Redis
// is asked for what the byte budget holds and one step more, not for the
// limit's worth of messages of up to 12 KB each.
const pageStep = 64

// page reads up to limit messages of conv after the id after ("" = the
// latest), step by step, within MaxPageBytes.
func (d *Direct) page(ctx context.Context, conv dm.Conversation, after string, limit int) (dm.Page, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	size := 0
	fits := func(m dm.Message, n int) bool {
		b, _ := json.Marshal(m)
		size += len(b) + 1
		return size <= MaxPageBytes || n == 0
	}
	if after == "" {
		var rev []dm.Message
		before := ""
		for len(rev) < limit {
			msgs, err := d.store.Before(ctx, conv, before, min(pageStep, limit-len(rev)))
			if err != nil {
				return dm.Page{}, err
			}
			for _, m := range msgs {
				if !fits(m, len(rev)) {
					return dm.Page{Messages: reversed(rev)}, nil
				}
				rev = append(rev, m)
			}
			if len(msgs) < pageStep {
				break
			}
			before = msgs[len(msgs)-1].ID
		}
		return dm.Page{Messages: reversed(rev)}, nil
	}
	var out dm.Page
	from := after
	for len(out.Messages) < limit {
		p, err := d.store.History(ctx, conv, from, min(pageStep, limit-len(out.Messages)))
		if err != nil {
			return dm.Page{}, err
		}
		if from == after {
			out.Gap = p.Gap
		}
		for _, m := range p.Messages {
			if !fits(m, len(out.Messages)) {
				out.More = true
				return out, nil
			}
			out.Messages = append(out.Messages, m)
		}
		out.More = p.More
		if !p.More {
			break
		}
		from = p.Messages[len(p.Messages)-1].ID
	}
	return out, nil
}

func reversed(ms []dm.Message) []dm.Message {
	out := make([]dm.Message, len(ms))
	for i, m := range ms {
		out[len(ms)-1-i] = m
	}
	return out
}

// List returns p's user's conversations, the most recently active first.
func (d *Direct) List(ctx context.Context, p realtime.Principal, limit int) ([]dm.Summary, error) {
	return d.store.List(ctx, p.User, limit)
}

// Block makes p's user block target; Unblock lifts it; Blocks lists them.
// They return names.ErrBadName, dm.ErrSelf and Redis errors.
func (d *Direct) Block(ctx context.Context, p realtime.Principal, target string) error {
	return d.store.Block(ctx, p.User, target, dm.BlockOptions{Guest: p.Guest()})
}

// Unblock lifts p's user's block of target.
func (d *Direct) Unblock(ctx context.Context, p realtime.Principal, target string) error {
	return d.store.Unblock(ctx, p.User, target)
}

// Blocks returns the canonical names p's user blocks.
func (d *Direct) Blocks(ctx context.Context, p realtime.Principal) ([]string, error) {
	return d.store.Blocks(ctx, p.User)
}

// CheckReach returns dm.ErrBlocked when from and to may not reach each
// other (a party invitation, for package match). It returns Redis errors.
func (d *Direct) CheckReach(ctx context.Context, from, to string) error {
	return d.store.CheckReach(ctx, from, to)
}

// AdminHistory is History for an admin, by conversation id, without the
// pair's check (the front audits the read). It returns
// dm.ErrNoConversation, dm.ErrBadID and Redis errors.
func (d *Direct) AdminHistory(ctx context.Context, id, after string, limit int) (dm.Conversation, dm.Page, error) {
	conv, err := d.store.Get(ctx, id)
	if err != nil {
		return dm.Conversation{}, dm.Page{}, err
	}
	page, err := d.page(ctx, conv, after, limit)
	return conv, page, err
}

// ErrUnknownMessage is AdminRemove's answer for a message that is not there.
var ErrUnknownMessage = errcode.New(errcode.UnknownMessage, "direct: no such message")

// AdminRemove removes message id of conversation conv; the pair's
// connections are told (dm_removed). It returns dm.ErrNoConversation,
// ErrUnknownMessage, dm.ErrBadID and Redis errors.
func (d *Direct) AdminRemove(ctx context.Context, id, msg string) error {
	conv, err := d.store.Get(ctx, id)
	if err != nil {
		return err
	}
	ok, err := d.store.Remove(ctx, conv, msg)
	if err != nil {
		return err
	}
	if !ok {
		return ErrUnknownMessage
	}
	d.markBoth(conv)
	return nil
}

// markBoth marks the pair's REST sessions' direct section dirty.
func (d *Direct) markBoth(conv dm.Conversation) {
	d.marks.User(conv.A, dirty.Of(dirty.Direct))
	d.marks.User(conv.B, dirty.Of(dirty.Direct))
}

// idemKey is a send's idempotency key: the session and the client's own
// id of the message, hashed to a fixed length ("" without an id).
func idemKey(session, id string) string {
	if id == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(id))
	return session + "." + hex.EncodeToString(sum[:16])
}
