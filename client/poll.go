package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/chatd/chatd/errcode"
)

// Section is a part of a session's state that a poll reports as dirty.
type Section string

// The poll sections (docs/PROTOCOL.md, "Polling").
const (
	SectionRooms        Section = "rooms"
	SectionMessages     Section = "messages"
	SectionLeaderboards Section = "leaderboards"
	SectionSettings     Section = "settings"
	SectionWallet       Section = "wallet"
	SectionNotices      Section = "notices"
	SectionMatch        Section = "match"
)

// PollResult is one poll's answer: the dirty sections and the fresh state
// of each. A field is set only when its section is dirty.
type PollResult struct {
	Dirty        []Section
	Rooms        []Room               // the rooms the session is in
	Messages     map[string][]Message // room → messages since the session's last poll, oldest first
	Leaderboards map[string]Entry     // board → the user's own entry
	Settings     *Settings
	Wallet       *Wallet
	Notices      []Notice     // notices the user had not seen (now marked seen)
	Match        []MatchEvent // the user's match events of the last 10 minutes, newest first
	// More is true when messages were left for the next poll (the answer's
	// messages are kept within 1 MiB).
	More bool
	// Gaps names the rooms some of whose messages since the last poll are
	// gone from the history (trimmed past the session's place, or Redis
	// lost the stream): their Messages are the latest left, the ones
	// between are gone — the poll's resume_gap. Reload such a room
	// (History) if it matters. Each gap is told once.
	Gaps []string
	// Raw holds every section's data as sent, sections this SDK does not
	// know included.
	Raw map[string]json.RawMessage
}

// Has reports whether s is dirty in r.
func (r *PollResult) Has(s Section) bool {
	for _, d := range r.Dirty {
		if d == s {
			return true
		}
	}
	return false
}

// MaxPollWait is the longest wait a poll may ask for.
const MaxPollWait = 30 * time.Second

// PollOnce polls once: it reads and clears the session's dirty sections.
// wait > 0 (whole seconds, at most MaxPollWait) parks a clean poll on the
// server until something becomes dirty or wait passes. A new session's
// first poll returns every section.
func (c *Client) PollOnce(ctx context.Context, wait time.Duration) (*PollResult, error) {
	w := min(max(wait, 0), MaxPollWait)
	secs := int((w + time.Second - 1) / time.Second)
	var raw struct {
		Dirty []Section                  `json:"dirty"`
		Data  map[string]json.RawMessage `json:"data"`
		More  bool                       `json:"more"`
		Gaps  []string                   `json:"gaps"`
	}
	// Not safe to repeat after an unknown outcome: the server cleared the
	// mask when it answered, so a repeat of a poll whose answer was lost
	// on the way would not return that answer's sections. (A request that
	// never left, a failed dial, is still retried.)
	err := c.do(ctx, call{method: http.MethodGet, path: path("poll"), query: url.Values{"wait": {strconv.Itoa(secs)}}, out: &raw, wait: w})
	if err != nil {
		return nil, err
	}
	r := &PollResult{Dirty: raw.Dirty, More: raw.More, Gaps: raw.Gaps, Raw: raw.Data}
	if r.Raw == nil {
		r.Raw = map[string]json.RawMessage{}
	}
	for _, s := range r.Dirty {
		p, ok := raw.Data[string(s)]
		if !ok {
			continue
		}
		var err error
		switch s {
		case SectionRooms:
			err = json.Unmarshal(p, &r.Rooms)
		case SectionMessages:
			err = json.Unmarshal(p, &r.Messages)
		case SectionLeaderboards:
			err = json.Unmarshal(p, &r.Leaderboards)
		case SectionSettings:
			r.Settings = new(Settings)
			err = json.Unmarshal(p, r.Settings)
		case SectionWallet:
			r.Wallet = new(Wallet)
			err = json.Unmarshal(p, r.Wallet)
		case SectionNotices:
			err = json.Unmarshal(p, &r.Notices)
		case SectionMatch:
			err = json.Unmarshal(p, &r.Match)
		}
		if err != nil {
			return r, fmt.Errorf("client: poll: section %s: %w", s, err)
		}
	}
	return r, nil
}

// PollOptions configure Poll.
type PollOptions struct {
	// Wait is each long poll's wait; 0 means 25 s (below the usual 30 s
	// idle timeout of proxies), at most MaxPollWait.
	Wait time.Duration
	// OnError, if set, is told of each failed poll before Poll waits to
	// retry it (for logging or metrics). Poll returns the errors that end
	// it instead.
	OnError func(err error, retryIn time.Duration)
}

// Poll long-polls until ctx ends, handing each answer with a dirty section
// to fn (in this goroutine: the next poll starts when fn returns). A clean
// answer (the wait passed) is not handed over. A failed poll is retried
// after a delay: the answer's Retry-After on 429 and 503 when it has one,
// else exponential backoff with full jitter (Config.Backoff), reset by a
// poll that succeeds. Poll returns ctx's error when ctx ends, fn's error
// if fn fails, and at once the errors that a retry cannot mend: a bad or
// ended token (ErrBadToken), a ban (ErrBanned), ErrForbidden and
// ErrBadRequest.
//
// The session's seats are renewed by every poll, so a REST client that
// polls keeps its seats.
func (c *Client) Poll(ctx context.Context, o PollOptions, fn func(ctx context.Context, r *PollResult) error) error {
	wait := o.Wait
	if wait <= 0 {
		wait = 25 * time.Second
	}
	fails := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := c.PollOnce(ctx, wait)
		if err == nil {
			fails = 0
			if len(r.Dirty) > 0 {
				if err := fn(ctx, r); err != nil {
					return err
				}
			}
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if final(err) {
			return err
		}
		d := c.backoff.Delay(fails)
		var e *Error
		if errors.As(err, &e) && e.RetryAfter > 0 {
			d = e.RetryAfter
		}
		fails++
		if o.OnError != nil {
			o.OnError(err, d)
		}
		c.log.Debug("chatd poll failed", "err", err, "retry_in", d)
		if !sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

// final reports whether err is an answer that a retry cannot change.
func final(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false // a transport error: the next node may answer
	}
	switch e.Code {
	case errcode.BadToken, errcode.Banned, errcode.Forbidden, errcode.BadRequest, errcode.NotFound:
		return true
	}
	return false
}
