package web

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/dirty"
)

// poll answers GET /poll: the sections dirty since the session's last poll,
// each with its fresh data (realtime.Node.Poll). Clean, it costs one Redis
// command; with wait it parks until a mark wakes it.
func (s *Server) poll(c *fiber.Ctx) error {
	// any wait is accepted and capped at dirty.MaxWait
	wait, err := intQuery(c, "wait", 0, 0, 1<<30)
	if err != nil {
		return err
	}
	sess := sessionOf(c)
	res, err := s.node.Poll(c.UserContext(), sess.User, sess.ID, min(time.Duration(wait)*time.Second, dirty.MaxWait))
	if err != nil {
		return err
	}
	return c.JSON(res)
}
