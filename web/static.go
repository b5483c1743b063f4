package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/chatd/chatd/errcode"
	jssdk "github.com/chatd/chatd/sdk/js"
)

// staticFiles is the browser client: plain HTML, CSS and ES modules, no
// build step, no external assets.
//
//go:embed static
var staticFiles embed.FS

// contentSecurityPolicy lets the page load only its own files and talk only
// to its own origin (HTTP and WebSocket). No inline script or style is
// allowed, so even a bug that put user text into markup could not run it.
const contentSecurityPolicy = "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// staticFile is one embedded file, ready to serve.
type staticFile struct {
	body  []byte
	ctype string
	etag  string
}

// loadStatic reads the embedded client: route ("/app.js", "/" for
// index.html, "/admin" for the admin console's admin.html) → file.
func loadStatic(fsys fs.FS) (map[string]staticFile, error) {
	files := map[string]staticFile{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(name))
		switch path.Ext(name) {
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".svg":
			ctype = "image/svg+xml"
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		f := staticFile{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		files["/"+name] = f
		switch name {
		case "index.html":
			files["/"] = f
		case "admin.html":
			files["/admin"] = f
		case "apidocs.html":
			files["/api"] = f // the API page: the endpoints of /api/v1/openapi.json
		}
		return nil
	})
	return files, err
}

// staticRoutes serves the browser client at GET /, the admin console at
// GET /admin, and their files by name.
// Each file is its own route, so the client never shadows an API path.
//
// File names carry no content hash (there is no build step), so every
// answer says "no-cache": the browser keeps the file and revalidates it
// with If-None-Match, which costs a 304 and no body.
func staticRoutes(app *fiber.App) {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	files, err := loadStatic(sub)
	if err != nil {
		panic(err) // embedded files always read
	}
	for route, f := range files {
		app.Get(route, serveStatic(f))
	}
	sdkRoutes(app)
}

// sdkRoutes serves the JavaScript SDK's ES modules (package jssdk, the
// npm package's src/*.js, byte for byte) at GET /sdk/{file}: the browser
// client imports /sdk/index.js, and any page on this origin may too. One
// route for every file, so that the router's table stays the documented
// one; a name that is not one of the SDK's files is 404 not_found.
func sdkRoutes(app *fiber.App) {
	files, err := loadStatic(jssdk.FS())
	if err != nil {
		panic(err) // embedded files always read
	}
	app.Get("/sdk/:file", func(c *fiber.Ctx) error {
		f, ok := files["/"+c.Params("file")]
		if !ok {
			return errf(errcode.NotFound, "no SDK file %q: the SDK's modules are served as /sdk/index.js and the files it imports", c.Params("file"))
		}
		return serveStatic(f)(c)
	})
}

func serveStatic(f staticFile) fiber.Handler {
	return func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "no-cache")
		c.Set(fiber.HeaderETag, f.etag)
		c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
		c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
		if strings.HasPrefix(f.ctype, "text/html") {
			c.Set(fiber.HeaderContentSecurityPolicy, contentSecurityPolicy)
			c.Set(fiber.HeaderXFrameOptions, "DENY")
		}
		if etagMatch(c.Get(fiber.HeaderIfNoneMatch), f.etag) {
			return c.SendStatus(fiber.StatusNotModified)
		}
		c.Set(fiber.HeaderContentType, f.ctype)
		return c.Send(f.body)
	}
}

// etagMatch reports whether an If-None-Match header names etag (weak or
// strong, or "*").
func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
