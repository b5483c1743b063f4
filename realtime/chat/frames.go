package chat

import (
	"github.com/chatd/chatd/realtime"
	"github.com/chatd/chatd/settings"
)

// AllowFrame is realtime.Client.AllowFrame at the node's clock, with the
// say ceiling raised to follow rate.messages_per_second: a connection may
// say at least 4 times the setting at once and the setting each second (a
// deployment that allows 10,000 messages a second is not held to 100).
func (ch *Chat) AllowFrame(c *realtime.Client, typ string) error {
	r := realtime.FrameRates[typ]
	if typ == "say" {
		rate := ch.settings.Float(settings.RateMessagesPerSecond)
		r = realtime.FrameRate{Rate: max(r.Rate, rate), Burst: max(r.Burst, 4*rate)}
		return c.AllowFrameAt(typ, r, ch.now())
	}
	return c.AllowFrame(typ, ch.now())
}
