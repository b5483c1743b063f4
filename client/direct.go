package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/chatd/chatd/protocol"
)

// Direct messages (docs/PROTOCOL.md, "Direct messages"): a conversation
// between two users, addressed by the other user's name or by its id.

// DirectMessage is a direct message.
type DirectMessage struct {
	ID           string `json:"id"`
	Conversation string `json:"conversation"`
	From         string `json:"from"`
	To           string `json:"to"`
	Text         string `json:"text"`
	TS           int64  `json:"ts"` // unix ms
}

// Conversation is a direct conversation as GET /direct lists it.
type Conversation struct {
	ID     string         `json:"id"`
	With   string         `json:"with"`
	Unread int            `json:"unread"`
	Read   string         `json:"read,omitempty"`
	Last   *DirectMessage `json:"last,omitempty"`
	Active int64          `json:"active"`
}

// DirectPage is a page of a conversation's history.
type DirectPage struct {
	Messages []DirectMessage `json:"messages"`
	Gap      bool            `json:"gap"`  // the history no longer holds what followed After
	More     bool            `json:"more"` // more follow: ask again after the last id
}

// Conversations returns the user's direct conversations, the most
// recently active first (limit 1–50; 0 = the server's 20).
func (c *Client) Conversations(ctx context.Context, limit int) ([]Conversation, error) {
	var out struct {
		Conversations []Conversation `json:"conversations"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("direct"), query: limitQuery("limit", limit), out: &out, safe: true})
	return out.Conversations, err
}

// OpenDirect opens (or finds) the conversation with a user and returns its
// id. Refusals: blocked, rate_limited (the budget of new conversations).
func (c *Client) OpenDirect(ctx context.Context, with string) (string, error) {
	var out struct {
		Conversation struct{ ID string } `json:"conversation"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("direct", with), out: &out, safe: true})
	return out.Conversation.ID, err
}

// SendDirect sends text in the conversation with with (a user's name,
// which opens it if need be, or a conversation id), under a fresh
// Idempotency-Key (or WithIdempotencyKey's) repeated on every retry: the
// message is stored once. Refusals: blocked, muted, rate_limited, too_long.
func (c *Client) SendDirect(ctx context.Context, with, text string, opts ...CallOption) (DirectMessage, error) {
	var out struct {
		Message DirectMessage `json:"message"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("direct", with, "messages"),
		body: map[string]string{"text": text}, out: &out, safe: true, key: idemKey(opts)})
	return out.Message, err
}

// DirectHistory returns a page of the conversation with with, oldest
// first: the latest Limit, or the ones after After.
func (c *Client) DirectHistory(ctx context.Context, with string, o HistoryOptions) (DirectPage, error) {
	q := limitQuery("limit", o.Limit)
	if o.After != "" {
		q.Set("after", o.After)
	}
	var out DirectPage
	err := c.do(ctx, call{method: http.MethodGet, path: path("direct", with, "messages"), query: q, out: &out, safe: true})
	return out, err
}

// MarkDirectRead marks the conversation read up to id and returns the
// unread count after.
func (c *Client) MarkDirectRead(ctx context.Context, with, id string) (int, error) {
	var out struct {
		Unread int `json:"unread"`
	}
	err := c.do(ctx, call{method: http.MethodPost, path: path("direct", with, "read"), body: map[string]string{"id": id}, out: &out, safe: true})
	return out.Unread, err
}

// Block blocks user (by canonical name; it survives sign-out): neither can
// write to the other, and user cannot invite the caller to a party.
func (c *Client) Block(ctx context.Context, user string) error {
	return c.do(ctx, call{method: http.MethodPut, path: path("blocks", user), safe: true})
}

// Unblock lifts the block of user.
func (c *Client) Unblock(ctx context.Context, user string) error {
	return c.do(ctx, call{method: http.MethodDelete, path: path("blocks", user), safe: true})
}

// Blocks returns the canonical names the user blocks.
func (c *Client) Blocks(ctx context.Context) ([]string, error) {
	var out struct {
		Blocks []string `json:"blocks"`
	}
	err := c.do(ctx, call{method: http.MethodGet, path: path("blocks"), out: &out, safe: true})
	return out.Blocks, err
}

// DirectEvent is a direct message on a Conn: sent or received by the
// user, once each, resumed after a reconnect (the Conn asks for every
// conversation it has seen after its last message).
type DirectEvent struct{ Message DirectMessage }

// DirectTypingEvent: From is typing in the conversation.
type DirectTypingEvent struct{ Conversation, From string }

// DirectReadEvent: the user marked the conversation read up to ID.
type DirectReadEvent struct {
	Conversation, ID string
	Unread           int64
}

// DirectRemovedEvent: an admin removed message ID of the conversation.
type DirectRemovedEvent struct{ Conversation, ID string }

func (DirectEvent) isEvent()        {}
func (DirectTypingEvent) isEvent()  {}
func (DirectReadEvent) isEvent()    {}
func (DirectRemovedEvent) isEvent() {}

// SendDirect sends text in the conversation with to (a name or an id) and
// returns the message's id once stored; the call's ref is its idempotency
// key, so a send repeated after a reconnect is stored once. Refusals
// (*Error): blocked, muted, rate_limited, too_long.
func (cn *Conn) SendDirect(ctx context.Context, to, text string) (string, error) {
	r, err := cn.call(ctx, &op{kind: opDirect}, protocol.DMSend{To: to, Text: text})
	return r.id, err
}

// TypingDirect tells the other user of the conversation that the user is
// typing; dropped while the Conn reconnects.
func (cn *Conn) TypingDirect(ctx context.Context, to string) error {
	return cn.fire(ctx, protocol.DMTyping{To: to, Ref: cn.newRef(opTyping)})
}

// MarkDirectRead marks the conversation read up to id; the user's
// connections get a DirectReadEvent. Dropped while the Conn reconnects.
func (cn *Conn) MarkDirectRead(ctx context.Context, to, id string) error {
	return cn.fire(ctx, protocol.DMRead{To: to, ID: id, Ref: cn.newRef(opRead)})
}

// fire sends f now, or drops it while the Conn reconnects.
func (cn *Conn) fire(ctx context.Context, f protocol.ClientFrame) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := encodeFrame(f)
	if err != nil {
		return err
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if err := cn.endedErrLocked(); err != nil {
		return err
	}
	if cn.sock != nil {
		cn.sock.enqueue(p)
	}
	return nil
}

// directSeen is how many ids per conversation a Conn remembers to drop a
// message it already queued.
const directSeen = 256

// dmState is what a Conn knows of a conversation: the newest id queued,
// and the last ids queued (a resume never queues one twice).
type dmState struct {
	last string
	seen map[string]bool
	ring []string
}

// directEvent applies a direct event. Under cn.mu.
func (cn *Conn) directEvent(s *socket, ev protocol.ServerEvent, out []Event) []Event {
	switch ev := ev.(type) {
	case protocol.DM:
		st := cn.dms[ev.Conversation]
		if st == nil {
			st = &dmState{seen: map[string]bool{}}
			cn.dms[ev.Conversation] = st
		}
		if st.seen[ev.ID] {
			cn.stats.Duplicates++
			return out
		}
		st.seen[ev.ID] = true
		if st.ring = append(st.ring, ev.ID); len(st.ring) > directSeen {
			delete(st.seen, st.ring[0])
			st.ring = st.ring[1:]
		}
		if compareIDs(ev.ID, st.last) > 0 {
			st.last = ev.ID
		}
		return append(out, DirectEvent{Message: DirectMessage{ID: ev.ID, Conversation: ev.Conversation, From: ev.From,
			To: ev.To, Text: ev.Text, TS: ev.TS}})
	case protocol.DMSent:
		if o := cn.byRef[ev.Ref]; o != nil && o.kind == opDirect {
			cn.resolveLocked(o, opResult{id: ev.ID})
		}
	case protocol.DMTypingEvent:
		return append(out, DirectTypingEvent{Conversation: ev.Conversation, From: ev.From})
	case protocol.DMReadEvent:
		return append(out, DirectReadEvent{Conversation: ev.Conversation, ID: ev.ID, Unread: ev.Unread})
	case protocol.DMRemoved:
		return append(out, DirectRemovedEvent{Conversation: ev.Conversation, ID: ev.ID})
	case protocol.DMGap:
		cn.resumeDirect(s)
	}
	return out
}

// resumeDirect asks s for every conversation the Conn has seen after its
// newest message there (after a reconnect, or a dm_gap). Under cn.mu.
func (cn *Conn) resumeDirect(s *socket) {
	for id, st := range cn.dms {
		ref := cn.refPrefix + "." + string(rune(opDirectResume)) + strconv.FormatUint(cn.refN.Add(1), 36)
		if p, err := encodeFrame(protocol.DMResume{To: id, After: st.last, Ref: ref}); err == nil {
			s.enqueue(p)
		}
	}
}
