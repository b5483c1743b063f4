package web

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime/polls"
)

// pollAPI serves the long poll (Polls), and caps the polls parked on
// this node per client address and per user.
type pollAPI struct {
	polls           *polls.Polls
	ip              proxies
	polling         inflight // long polls parked per client address and per user
	maxPollsPerAddr int      // Config.MaxPollsPerAddr
	maxPollsPerUser int      // Config.MaxPollsPerUser
}

// poll answers GET /poll: the sections dirty since the session's last poll,
// each with its fresh data (polls.Polls). Clean, it costs one Redis
// command; with wait it parks until a mark wakes it.
func (h *pollAPI) poll(c *fiber.Ctx) error {
	most := int(polls.MaxPollWait / time.Second)
	wait := 0
	if raw := c.Query("wait"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 || n > most {
			return errf(errcode.BadRequest, "wait must be a whole number of seconds from 0 to %d; got %q", most, clipText(raw, 20))
		}
		wait = n
	}
	p := principal(c)
	if wait > 0 {
		done, err := h.parkPoll(c, p.User)
		if err != nil {
			return err
		}
		defer done()
	}
	res, err := h.polls.Poll(c.UserContext(), p, time.Duration(wait)*time.Second)
	if err != nil {
		return err
	}
	return c.JSON(res)
}
