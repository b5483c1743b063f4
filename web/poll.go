package web

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	"github.com/chatd/chatd/realtime"
)

// poll answers GET /poll: the sections dirty since the session's last poll,
// each with its fresh data (realtime.Polls). Clean, it costs one Redis
// command; with wait it parks until a mark wakes it.
func (s *Server) poll(c *fiber.Ctx) error {
	most := int(realtime.MaxPollWait / time.Second)
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
		done, err := s.parkPoll(c, p.User)
		if err != nil {
			return err
		}
		defer done()
	}
	res, err := s.polls.Poll(c.UserContext(), p, time.Duration(wait)*time.Second)
	if err != nil {
		return err
	}
	return c.JSON(res)
}
