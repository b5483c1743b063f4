package direct

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
	"github.com/chatd/chatd/names"
)

// Page is a page of a conversation's history.
type Page struct {
	// Messages, oldest first.
	Messages []Message
	// Gap reports that the history no longer holds what directly follows
	// the after id asked for (trimmed by HistoryMax or expired): messages
	// were lost between it and the first of Messages.
	Gap bool
	// More reports that more messages follow the last of Messages.
	More bool
}

// History returns up to limit messages of conv after the id after (""
// = the latest limit messages). It returns ErrBadID and Redis errors; the
// caller checks that the reader is one of the pair.
func (s *Service) History(ctx context.Context, conv Conversation, after string, limit int) (Page, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	k := logKey(s.ks, conv.ID)
	var p Page
	if after == "" {
		rows, err := s.rdb.XRevRangeN(ctx, k, "+", "-", int64(limit)).Result()
		if err != nil {
			return Page{}, fmt.Errorf("direct: history of %s: %w", conv.ID, err)
		}
		for i := len(rows) - 1; i >= 0; i-- {
			p.Messages = append(p.Messages, s.message(conv, rows[i]))
		}
		return p, nil
	}
	id, err := NormalizeID(after)
	if err != nil {
		return Page{}, err
	}
	var rows *redis.XMessageSliceCmd
	var first *redis.XMessageSliceCmd
	_, err = s.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		rows = pl.XRangeN(ctx, k, "("+rawID(id), "+", int64(limit)+1)
		first = pl.XRangeN(ctx, k, "-", "+", 1)
		return nil
	})
	if err != nil {
		return Page{}, fmt.Errorf("direct: history of %s: %w", conv.ID, err)
	}
	for i, r := range rows.Val() {
		if i == limit {
			p.More = true
			break
		}
		p.Messages = append(p.Messages, s.message(conv, r))
	}
	// A gap: the oldest message kept is newer than after, and after is
	// not 0 (a client that saw nothing yet asks from the start).
	if f := first.Val(); len(f) > 0 && rawID(id) != "0-0" {
		oldest, _ := NormalizeID(f[0].ID)
		p.Gap = oldest > id
	}
	return p, nil
}

func (s *Service) message(conv Conversation, r redis.XMessage) Message {
	id, _ := NormalizeID(r.ID)
	from, _ := r.Values["from"].(string)
	text, _ := r.Values["text"].(string)
	tsS, _ := r.Values["ts"].(string)
	ts, _ := strconv.ParseInt(tsS, 10, 64)
	return Message{ID: id, Conversation: conv.ID, From: from, To: conv.Peer(from), Text: text, TS: ts}
}

// MarkRead marks conv read by user up to message id (a mark never goes
// back) and returns user's unread count after it. It returns
// ErrNoConversation (user not of the pair), ErrBadID and Redis errors.
func (s *Service) MarkRead(ctx context.Context, conv Conversation, user, id string) (int64, error) {
	id, err := NormalizeID(id)
	if err != nil {
		return 0, err
	}
	res, err := redisx.Run(ctx, s.rdb, readMarkScript, []string{metaKey(s.ks, conv.ID), logKey(s.ks, conv.ID)},
		names.Canonical(user), rawID(id), s.cfg.HistoryMax+100).Slice()
	if err != nil {
		return 0, fmt.Errorf("direct: read mark in %s: %w", conv.ID, err)
	}
	n, _ := res[0].(int64)
	if n < 0 {
		return 0, ErrNoConversation
	}
	return n, nil
}

// Summary is one conversation of a user's list.
type Summary struct {
	ID string `json:"id"`
	// With is the other one of the pair.
	With string `json:"with"`
	// Unread is how many of With's messages the user has not marked read.
	Unread int64 `json:"unread"`
	// Read is the id the user read up to ("" = none).
	Read string `json:"read,omitempty"`
	// Last is the conversation's last message, if any is kept.
	Last *Message `json:"last,omitempty"`
	// Active is the unix ms of its last activity.
	Active int64 `json:"active"`
}

// List returns user's conversations, the most recently active first, at
// most limit (1–100; else 50), with unread counts and last messages. It
// returns Redis errors. A conversation that expired is left out (and off
// the list).
func (s *Service) List(ctx context.Context, user string, limit int) ([]Summary, error) {
	if limit <= 0 || limit > 100 {
		limit = 50
	}
	u := names.Canonical(user)
	zs, err := s.rdb.ZRevRangeWithScores(ctx, convsKey(s.ks, u), 0, int64(limit-1)).Result()
	if err != nil {
		return nil, fmt.Errorf("direct: list of %s: %w", user, err)
	}
	metas := make([]*redis.SliceCmd, len(zs))
	lasts := make([]*redis.XMessageSliceCmd, len(zs))
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, z := range zs {
			id, _ := z.Member.(string)
			metas[i] = p.HMGet(ctx, metaKey(s.ks, id), "an", "bn", "guest", "unread:"+u, "read:"+u)
			lasts[i] = p.XRevRangeN(ctx, logKey(s.ks, id), "+", "-", 1)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("direct: list of %s: %w", user, err)
	}
	out := make([]Summary, 0, len(zs))
	var gone []any
	for i, z := range zs {
		id, _ := z.Member.(string)
		v := metas[i].Val()
		an, _ := v[0].(string)
		bn, _ := v[1].(string)
		if an == "" || bn == "" {
			gone = append(gone, id)
			continue
		}
		g, _ := v[2].(string)
		conv := Conversation{ID: id, A: an, B: bn, Guest: g == "1"}
		sm := Summary{ID: id, With: conv.Peer(user), Active: int64(z.Score)}
		if n, ok := v[3].(string); ok {
			sm.Unread, _ = strconv.ParseInt(n, 10, 64)
		}
		if r, ok := v[4].(string); ok {
			sm.Read, _ = NormalizeID(r)
		}
		if l := lasts[i].Val(); len(l) > 0 {
			m := s.message(conv, l[0])
			sm.Last = &m
		}
		out = append(out, sm)
	}
	if len(gone) > 0 {
		if err := s.rdb.ZRem(ctx, convsKey(s.ks, u), gone...).Err(); err != nil {
			return out, fmt.Errorf("direct: list of %s: %w", user, err)
		}
	}
	return out, nil
}

// Remove removes message id of conv (moderation) and publishes a
// dm_removed event to the pair. It returns false when there was no such
// message, ErrBadID and Redis errors.
func (s *Service) Remove(ctx context.Context, conv Conversation, id string) (bool, error) {
	id, err := NormalizeID(id)
	if err != nil {
		return false, err
	}
	frame := fmt.Sprintf(`{"type":%q,"conversation":"%s","id":"%s"}`, EventRemoved, conv.ID, id) // all [0-9a-z_-]
	// recorded under the call, which ends while the record is kept: the
	// Redis client's retry of a late call answers the first copy's result
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	keys := []string{logKey(s.ks, conv.ID), removedKey(s.ks, conv.ID, redisx.CallID())}
	n, err := redisx.Run(ctx, s.rdb, messageRemoveScript, keys, rawID(id), s.ch,
		envelope([]string{names.Canonical(conv.A), names.Canonical(conv.B)}, frame), redisx.CallRecordTTL.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("direct: remove %s in %s: %w", id, conv.ID, err)
	}
	return n == 1, nil
}

// Before returns up to limit messages of conv older than the id before
// ("" = the newest), newest first. It returns ErrBadID and Redis errors.
func (s *Service) Before(ctx context.Context, conv Conversation, before string, limit int) ([]Message, error) {
	hi := "+"
	if before != "" {
		id, err := NormalizeID(before)
		if err != nil {
			return nil, err
		}
		hi = "(" + rawID(id)
	}
	rows, err := s.rdb.XRevRangeN(ctx, logKey(s.ks, conv.ID), hi, "-", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("direct: history of %s: %w", conv.ID, err)
	}
	out := make([]Message, len(rows))
	for i, r := range rows {
		out[i] = s.message(conv, r)
	}
	return out, nil
}
