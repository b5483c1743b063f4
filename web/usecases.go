package web

import "github.com/chatd/chatd/realtime/app"

// UseCasesOf are the use cases a node's realtime/app composed, as the
// front serves them: the one mapping, which cmd/chatd/compose and this
// package's tests both use. It builds nothing.
func UseCasesOf(a *app.App) UseCases {
	return UseCases{Chat: a.Chat, REST: a.REST, Reads: a.Reads, Polls: a.Polls, Sessions: a.Sessions, Match: a.Match, RPC: a.RPC, Core: a,
		Game: a.Game, Moderation: a.Moderation, Admin: a.Admin, ServerAPI: a.ServerAPI, Direct: a.Direct}
}
