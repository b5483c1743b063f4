// Package csharpsdk holds chatd's C# SDK (README.md beside this file): the
// HTTP API, the WebSocket with reconnect, failover and resume, and the
// documented error codes, in C# that needs only netstandard2.0's base
// class library (no NuGet package), so it runs in Unity and on .NET and
// Mono alike.
//
// It owns no Redis keys and runs nothing: the SDK speaks the contract of
// docs/PROTOCOL.md like any other client. Its tests (tests/Tests.cs, built
// with mcs and run under mono against two real chatd nodes sharing one
// redis-server) run from csharp_test.go, so that `go test ./...` covers
// them. The package has no Go API.
package csharpsdk
