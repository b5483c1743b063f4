// Package polls is the REST poll use case of a chatd node (GET
// /api/v1/poll): a clean poll costs one Redis round trip (dirty's take
// script, whose GETDEL reads and clears the session's dirty mask); a dirty one reads each dirty
// section's fresh state (rooms, messages, settings, wallet, leaderboards,
// match, notices); a long poll parks until a mark wakes it, at most
// MaxPollsPerSession of them per session on a node.
//
// It owns no Redis keys. It is built (New) from the domain services it
// reads, each through an interface declared here (pollTracker, pollRooms,
// pollHistory, pollSettings, pollWallets, pollBoards), and from what it
// needs of other parts: sessionKeeper (chat.REST.RenewPoll: a poll keeps
// its session's seats and presence, at most once per third of the lease),
// noticeTaker (the core's notices), matchEvents (package match),
// gapCounter (the core's Hub), realtime.BlockLister (package direct: the
// messages section leaves out the messages of users the session's user
// blocks, one SMEMBERS per poll that reads messages, and moves the
// cursors past them). It reads no other use case's fields.
//
// # What it shows, and why the naive versions fail
//
// A dirty bitmask per session: the producers (a say, a join, a purchase,
// a post, a settings write) mark what changed, coalesced by the core's
// marks; the poll reads only what is marked. Polling every section every
// time costs every session a dozen commands per poll.
//
// Bounded answers: the messages of all of a session's rooms are read in
// name order within MaxPollMessageBytes of JSON, page by page (PollPage at
// a time), so Redis is asked for what the budget can hold and one page
// more, not for a room's whole history; what is left stays dirty and the
// answer says "more". A cursor the history no longer holds is a gap,
// named in the answer ("gaps") and counted, never passed over in silence:
// the poll's one catch-up rule (readWithin), as the core's Feed has its
// own.
package polls
