// Package docs holds chatd's machine-readable contract, embedded so that a
// node can serve it: OpenAPI is docs/openapi.json (OpenAPI 3.1, every HTTP
// route) and WSFrames is docs/ws-frames.schema.json (JSON Schema 2020-12,
// every WebSocket frame both ways). The prose contract is PROTOCOL.md
// beside them.
//
// The package exists because go:embed cannot reach a parent directory:
// package web, which serves GET /api/v1/openapi.json, imports these bytes
// from here instead of keeping a copy that could drift. It owns no Redis
// data and imports nothing of chatd.
package docs

import _ "embed" // the documents

// OpenAPI is docs/openapi.json as written. Callers must not modify it.
//
//go:embed openapi.json
var OpenAPI []byte

// WSFrames is docs/ws-frames.schema.json as written. Callers must not
// modify it.
//
//go:embed ws-frames.schema.json
var WSFrames []byte
