package notices

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/internal/redisx"
)

// Limits of a notice.
const (
	MaxText = 1000 // characters
	MaxKept = 100  // notices kept in history
)

// ErrBadText is returned for an empty, too long or non-UTF-8 notice.
var ErrBadText = errcode.New(errcode.BadValue, "notices: bad text")

//go:embed lua/notice_post.lua
var postSrc string

var postScript = redisx.NewScript("notices.notice_post", postSrc)

// Notice is one global notice.
type Notice struct {
	ID   string    `json:"id"`
	Text string    `json:"text"`
	TS   time.Time `json:"ts"`
}

// Event is a notice as published on the channel and sent to WebSocket
// clients: {"type":"notice","id","text","ts"}.
type Event struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Text string `json:"text"`
	TS   int64  `json:"ts"` // ms since the epoch
}

// Config configures a Board.
type Config struct {
	// Prefix is the key prefix; "" = keyspace.DefaultPrefix.
	Prefix string
	// Now is the clock of notice times; nil = time.Now.
	Now func() time.Time
}

// Board posts and lists notices.
type Board struct {
	rdb    redis.UniversalClient
	ks     keyspace.Space
	now    func() time.Time
	stream string
	events string
}

// New returns a Board on rdb.
func New(rdb redis.UniversalClient, cfg Config) *Board {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ks := keyspace.New(cfg.Prefix)
	return &Board{rdb: rdb, ks: ks, now: cfg.Now, stream: streamKey(ks), events: eventsChannel(ks)}
}

// Channel returns the channel each new notice is published on.
func (b *Board) Channel() string { return b.events }

// Post stores a notice and publishes it to every node, once: the script
// records the notice's id for redisx.CallRecordTTL under a key of this call,
// so that go-redis' retry of the call (sent when the reply is late; the first
// copy may have run) answers that id instead of storing and broadcasting the
// notice again. The call's context ends redisx.CallBound after it started at
// the latest, so no retry is sent after the record may have lapsed. A new
// call is a new notice. It returns ErrBadText for an empty, too long (over
// MaxText characters) or invalid text, and Redis errors.
func (b *Board) Post(ctx context.Context, text string) (Notice, error) {
	if text == "" || !utf8.ValidString(text) || utf8.RuneCountInString(text) > MaxText {
		return Notice{}, fmt.Errorf("%w: a notice is 1 to %d characters of UTF-8 text", ErrBadText, MaxText)
	}
	now := b.now()
	ctx, cancel := redisx.BoundCall(ctx)
	defer cancel()
	keys := []string{b.stream, postedKey(b.ks, redisx.CallID())}
	id, err := postScript.Run(ctx, b.rdb, keys, b.events, text, now.UnixMilli(), MaxKept, redisx.CallRecordTTL.Milliseconds()).Text()
	if err != nil {
		return Notice{}, fmt.Errorf("notices: post: %w", err)
	}
	return Notice{ID: id, Text: text, TS: time.UnixMilli(now.UnixMilli()).UTC()}, nil
}

// Recent returns up to n of the latest notices, oldest first.
func (b *Board) Recent(ctx context.Context, n int) ([]Notice, error) {
	if n <= 0 || n > MaxKept {
		n = MaxKept
	}
	xs, err := b.rdb.XRevRangeN(ctx, b.stream, "+", "-", int64(n)).Result()
	if err != nil {
		return nil, fmt.Errorf("notices: recent: %w", err)
	}
	out := make([]Notice, 0, len(xs))
	for i := len(xs) - 1; i >= 0; i-- {
		x := xs[i]
		text, _ := x.Values["text"].(string)
		ms, _ := strconv.ParseInt(fmt.Sprint(x.Values["ts"]), 10, 64)
		out = append(out, Notice{ID: x.ID, Text: text, TS: time.UnixMilli(ms).UTC()})
	}
	return out, nil
}

// DecodeEvent decodes a payload of the notices channel.
func DecodeEvent(p []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(p, &e); err != nil || e.Type != "notice" || e.ID == "" {
		return Event{}, errors.New("notices: malformed event")
	}
	return e, nil
}
