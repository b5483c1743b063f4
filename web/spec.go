package web

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/docs"
)

// etagOf is the strong ETag of an embedded document: its bytes never
// change while the process runs.
func etagOf(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

// specRoutes serves the contract: GET /api/v1/openapi.json is
// docs/openapi.json and GET /api/v1/ws-frames.schema.json is
// docs/ws-frames.schema.json, as embedded in this binary, without a token
// (they hold no secret and a client generator needs them before it has a
// session). A document changes only with the binary, so it may be cached
// for an hour and revalidated with If-None-Match (304, no body).
func specRoutes(api fiber.Router) {
	api.Get("/openapi.json", serveDoc(docs.OpenAPI))
	api.Get("/ws-frames.schema.json", serveDoc(docs.WSFrames))
}

func serveDoc(doc []byte) fiber.Handler {
	etag := etagOf(doc)
	return func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "public, max-age=3600")
		c.Set(fiber.HeaderETag, etag)
		c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
		c.Set(fiber.HeaderAccessControlAllowOrigin, "*")
		if etagMatch(c.Get(fiber.HeaderIfNoneMatch), etag) {
			return c.SendStatus(fiber.StatusNotModified)
		}
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
		return c.Send(doc)
	}
}
