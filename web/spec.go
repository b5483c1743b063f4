package web

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/docs"
)

// specETag is the strong ETag of the embedded OpenAPI document: its bytes
// never change while the process runs.
var specETag = func() string {
	sum := sha256.Sum256(docs.OpenAPI)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()

// specRoutes serves the contract: GET /api/v1/openapi.json is
// docs/openapi.json as embedded in this binary, without a token (it holds
// no secret and a client generator needs it before it has a session).
// The document changes only with the binary, so it may be cached for an
// hour and revalidated with If-None-Match (304, no body).
func (s *Server) specRoutes(api fiber.Router) {
	api.Get("/openapi.json", serveSpec)
}

func serveSpec(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "public, max-age=3600")
	c.Set(fiber.HeaderETag, specETag)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
	if etagMatch(c.Get(fiber.HeaderIfNoneMatch), specETag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Send(docs.OpenAPI)
}
