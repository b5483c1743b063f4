package realtime

import (
	"fmt"
	"time"

	"github.com/chatd/chatd/errcode"
)

// ErrFrameRate is the sentinel of a frame refused because the connection
// sent frames of its kind faster than FrameRates allows.
var ErrFrameRate = errcode.New(errcode.RateLimited, "realtime: too many frames of this type")

// FrameRate is how many frames of one kind a connection may send: Burst at
// once, then Rate a second.
type FrameRate struct {
	Rate  float64 // frames per second
	Burst float64 // frames at once
}

// FrameRates is the rate of every client frame type, per connection, counted on the node the connection is on (no Redis call): a
// frame over its rate is refused as rate_limited before it does any work,
// and, like every rate-limited refusal, AbuseLimit of them within
// AbuseWindow close the connection (1008), so a flood of any frame type
// ends within a few dozen frames. A say also has its rate in Redis
// (rate.messages_per_second per user per lobby); its ceiling here bounds
// the says refused before they reach the bucket (a room not held, an
// unknown room), and follows the setting when that is higher
// (chat.Chat.AllowFrame, in realtime/chat). The rates are far above what a client needs; they bound what one socket can make a node and
// Redis do (docs/PROTOCOL.md, "Cost model"). A frame that is not valid
// JSON, is binary or has an unknown type counts as "other".
var FrameRates = map[string]FrameRate{
	"say":     {Rate: 20, Burst: 50},
	"join":    {Rate: 5, Burst: 30},
	"leave":   {Rate: 5, Burst: 30},
	"resume":  {Rate: 5, Burst: 30},
	"typing":  {Rate: 10, Burst: 100},
	"read":    {Rate: 10, Burst: 100},
	"queue":   {Rate: 5, Burst: 50},
	"dequeue": {Rate: 5, Burst: 50},
	"invite":  {Rate: 1, Burst: 10},
	"accept":  {Rate: 5, Burst: 50},
	"decline": {Rate: 5, Burst: 50},
	"rpc":     {Rate: 5, Burst: 20},
	"ping":    {Rate: 50, Burst: 500},
	// direct messages (realtime/direct): a send also has its bucket in
	// Redis (per sender per conversation), an open its budget of new
	// conversations per user
	"dm_open":   {Rate: 2, Burst: 20},
	"dm_send":   {Rate: 20, Burst: 50},
	"dm_typing": {Rate: 10, Burst: 100},
	"dm_read":   {Rate: 10, Burst: 100},
	"dm_resume": {Rate: 5, Burst: 50},
	"other":     {Rate: 20, Burst: 200},
}

// frameBucket is one kind's token bucket of one connection.
type frameBucket struct {
	tokens float64
	at     time.Time
}

// AllowFrame takes a token of c's bucket for frames of type typ (a type not
// in FrameRates counts as "other"), and returns a rate_limited error
// (wrapping ErrFrameRate) when there is none. It touches no Redis. Refuse
// the error with Client.Refuse so a flood closes the connection.
func (c *Client) AllowFrame(typ string, now time.Time) error {
	r, ok := FrameRates[typ]
	if !ok {
		typ, r = "other", FrameRates["other"]
	}
	return c.AllowFrameAt(typ, r, now)
}

// AllowFrameAt takes a token of c's bucket for typ at rate r (a use case
// that raises a type's rate with a setting: the say's).
func (c *Client) AllowFrameAt(typ string, r FrameRate, now time.Time) error {
	c.amu.Lock()
	defer c.amu.Unlock()
	if c.frames == nil {
		c.frames = map[string]*frameBucket{}
	}
	b := c.frames[typ]
	if b == nil {
		b = &frameBucket{tokens: r.Burst, at: now}
		c.frames[typ] = b
	}
	if now.After(b.at) {
		b.tokens = min(r.Burst, b.tokens+now.Sub(b.at).Seconds()*r.Rate)
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return nil
	}
	retry := time.Duration((1 - b.tokens) / r.Rate * float64(time.Second))
	return &LimitError{Err: ErrFrameRate, Retry: retry,
		Text: fmt.Sprintf("at most %g %q frames a second (%g at once) on one connection; retry in %.1f s", r.Rate, typ, r.Burst, retry.Seconds())}
}
