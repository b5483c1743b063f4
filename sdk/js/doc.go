// Package jssdk holds chatd's JavaScript SDK (the npm package
// @chatd/client, README.md beside this file) and exports its ESM source
// files so that a Go server can serve them to browsers as they are,
// without a copy or a build step: Source holds src/*.js, and FS is that
// directory as the root of a file system (index.js, realtime.js, …).
//
// It owns no Redis keys and runs nothing: the SDK speaks the contract of
// docs/PROTOCOL.md over HTTP, WebSocket and Server-Sent Events like any
// other client. Its tests (npm test: node's test runner against real
// chatd nodes, and headless Chromium) run from sdk_test.go, so that
// `go test ./...` covers them.
package jssdk
