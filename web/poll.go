package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/dirty"
)

// poll answers GET /poll: the sections dirty since the session's last poll,
// each with its fresh data (realtime.Node.Poll). Clean, it costs one Redis
// command; with wait it parks until a mark wakes it.
func (s *Server) poll(c *fiber.Ctx) error {
	// any whole number of seconds is accepted and cut to dirty.MaxWait
	wait := 0
	if raw := c.Query("wait"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 0 {
			return errf(http.StatusBadRequest, "bad_request", "wait must be a whole number of seconds, 0 or more (longer than %d counts as %d); got %q",
				int(dirty.MaxWait/time.Second), int(dirty.MaxWait/time.Second), clipText(raw, 20))
		}
		wait = min(n, int(dirty.MaxWait/time.Second))
	}
	sess := sessionOf(c)
	res, err := s.node.Poll(c.UserContext(), sess.User, sess.ID, min(time.Duration(wait)*time.Second, dirty.MaxWait))
	if err != nil {
		return err
	}
	return c.JSON(res)
}
