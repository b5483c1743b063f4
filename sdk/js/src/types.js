// The shapes of PROTOCOL.md ("Shapes", and the answers of the HTTP API),
// as JSDoc types. Fields are added to the contract over time, never
// removed: code that reads these ignores what it does not know.

/**
 * @typedef {object} Room
 * @property {string} id `{lobby}-{seq}`, e.g. `general-3`
 * @property {string} lobby
 * @property {number} seq
 * @property {number} capacity the current `room.capacity`
 * @property {string[]} members users holding a live seat
 */

/**
 * @typedef {object} Message
 * @property {string} id zero-padded stream id; the ids of one room sort in send order as strings
 * @property {string} room
 * @property {string} from
 * @property {string} text
 * @property {string} ts RFC 3339 with milliseconds, UTC
 */

/**
 * @typedef {object} Session
 * @property {string} token the bearer token (a JWT)
 * @property {string} user the user name
 */

/**
 * @typedef {object} LobbySummary
 * @property {string} lobby
 * @property {number} online seated users
 * @property {number} rooms
 */

/**
 * @typedef {object} Entry
 * @property {string} player
 * @property {number} score
 * @property {number} rank 0 is best; -1 for a player with no score (ranks)
 */

/** @typedef {'best' | 'incr' | 'set'} ScoreMode */

/**
 * @typedef {object} Wallet
 * @property {number} balance
 * @property {Record<string, number>} items item → count
 */

/**
 * @typedef {object} Item
 * @property {string} item
 * @property {number} stock
 * @property {number} price
 */

/** @typedef {number | string} SettingValue */

/**
 * @typedef {object} Settings
 * @property {number} version only grows
 * @property {Record<string, SettingValue>} values every key, defaults included
 */

/**
 * @typedef {object} SettingDef
 * @property {string} key
 * @property {'int' | 'number' | 'string'} type
 * @property {string} description
 * @property {SettingValue} default
 * @property {number} [min]
 * @property {number} [max]
 * @property {boolean} [min_exclusive]
 * @property {string[]} [enum]
 */

/**
 * @typedef {object} Presence
 * @property {string} user
 * @property {boolean} online
 * @property {string} node
 * @property {string[]} rooms
 * @property {string | null} last_seen
 */

/** @typedef {'rooms' | 'messages' | 'leaderboards' | 'settings' | 'wallet' | 'notices' | 'match' | 'direct'} PollSection */

/**
 * A direct message (docs/PROTOCOL.md, "Direct messages").
 * @typedef {object} DirectMessage
 * @property {string} id padded stream id: ids of one conversation sort as strings
 * @property {string} conversation "dm-" and 32 hex digits
 * @property {string} from
 * @property {string} to
 * @property {string} text
 * @property {number} ts unix ms
 */

/**
 * One of the user's direct conversations (GET /direct).
 * @typedef {object} Conversation
 * @property {string} id
 * @property {string} with the other user
 * @property {number} unread
 * @property {string} [read] the id the user read up to
 * @property {DirectMessage} [last]
 * @property {number} active unix ms of the last activity
 */

/**
 * A page of a conversation's history.
 * @typedef {object} DirectPage
 * @property {DirectMessage[]} messages oldest first
 * @property {boolean} gap the history no longer holds what followed `after`
 * @property {boolean} more more follow: ask again after the last id
 */

/**
 * What a player is told about a matchmaking ticket (PROTOCOL.md, "Matchmaking").
 * @typedef {object} MatchEvent
 * @property {'matched' | 'ticket_expired' | 'party_invite' | 'party_update'} type
 * @property {string} queue
 * @property {string} ticket
 * @property {string} [match]
 * @property {string} [room] the match's room: join it by this id (resume)
 * @property {string[]} [players]
 * @property {number} [reserve_seconds]
 * @property {string} [leader] party events: who invited
 * @property {'pending' | 'waiting' | 'cancelled'} [state] party events: the party's ticket's state after
 * @property {string} [user] party_update: who acted
 * @property {'accepted' | 'declined' | 'cancelled' | 'offline'} [reason] party_update: what happened
 * @property {string[]} [accepted] party events: the invitees who accepted
 * @property {number} [expires] party_invite: unix ms, when the invitation lapses (accept or decline it by ticket before)
 * @property {number} ts unix ms
 */

/**
 * @typedef {object} Notice
 * @property {string} id
 * @property {string} text
 */

/**
 * The fresh data of each dirty section (PROTOCOL.md, "Polling").
 * @typedef {object} PollData
 * @property {Room[]} [rooms] the rooms the session is in
 * @property {Record<string, Message[]>} [messages] room → its new messages, oldest first
 * @property {Record<string, Entry>} [leaderboards] board → the user's own entry
 * @property {Settings} [settings]
 * @property {Wallet} [wallet]
 * @property {Notice[]} [notices] notices the user had not seen (now marked seen)
 * @property {MatchEvent[]} [match] the user's match events of the last 10 minutes, newest first
 */

/**
 * @typedef {object} PollAnswer
 * @property {PollSection[]} dirty
 * @property {PollData} data
 * @property {true} [more] messages were left for the next poll (over the answer's 1 MiB)
 * @property {string[]} [gaps] rooms some of whose messages since the last poll are gone from the history (trimmed past the session's place, or Redis lost the stream): their `messages` are the latest left — the poll's `resume_gap`; reload such a room if it matters
 */

export {};
