// The realtime client's options, answers and events, as JSDoc types.

/** @typedef {import('./types.js').Room} Room */
/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./types.js').MatchEvent} MatchEvent */
/** @typedef {import('./types.js').SettingValue} SettingValue */
/** @typedef {import('./errors.js').ChatdError} ChatdError */
/** @typedef {import('./transport.js').TransportFactory} TransportFactory */
/** @typedef {import('./transport.js').ServerEvent} ServerEvent */
/** @typedef {import('./transport.js').WebSocketConstructor} WebSocketConstructor */
/** @typedef {import('./backoff.js').BackoffOptions} BackoffOptions */

/**
 * @typedef {object} RealtimeOptions
 * @property {string | string[] | ((attempt: number) => string | Promise<string>)} url
 *   the WebSocket URL (`wss://host/ws`), a list of them (tried in turn: each close or failed open moves to the next),
 *   or a function asked before every attempt
 * @property {string | (() => string)} token the session token (a function is asked at every attempt)
 * @property {WebSocketConstructor} [WebSocket] default globalThis.WebSocket (Node 20 has none without --experimental-websocket)
 * @property {boolean} [batch] open with ?batch=1 (several events per frame, split on '\n'); default true
 * @property {TransportFactory} [transport] instead of the WebSocket transport (WebSocket and batch are then unused)
 * @property {TransportFactory} [fallback] the transport to fall back to (`sseTransport()`) once the main one failed
 *   `fallbackAfter` opens in a row without reaching `hello` (refused, or closed before it) and has not reached it
 *   since connect() (once it has, failed opens are an outage, retried on it); the client stays on the fallback until
 *   it is closed and connected again
 * @property {number} [fallbackAfter] failed opens of the main transport in a row before the fallback (default 1)
 * @property {() => Promise<unknown>} [probe] asked after an open fails (a browser cannot see why): a ChatdError
 *   `bad_token` ends the client as session_ended, `banned` as banned. ChatdClient.realtime() sets it.
 * @property {BackoffOptions} [backoff] reconnect delays (default base 500 ms, max 15 s, full jitter)
 * @property {number} [policyDelay] ms, the least wait after 1008 (default 5000)
 * @property {number} [tryLaterDelay] ms, the least wait after 1013 (default 1000)
 * @property {number} [stableAfter] ms a connection must last for the backoff to start over (default 5000)
 * @property {number} [connectTimeout] ms for an open to reach `hello` (default 10000)
 * @property {number} [pingInterval] ms between keep-alive pings; 0 = none (default 20000)
 * @property {number} [pongTimeout] ms a ping may wait for its pong before the connection counts as dead (default 10000)
 * @property {number} [typingInterval] ms: typing() sends at most one frame per room this often (default 2000, the server's)
 * @property {boolean} [reconnectOnKick] reconnect by itself after a kick (4001); default false: the client closes
 */

/**
 * @typedef {object} Ack
 * @property {string} id the stored message's id
 * @property {string} room
 * @property {string} ref the say's ref
 */

/**
 * @typedef {object} RoomState
 * @property {Room} room as the latest `joined` said
 * @property {string | undefined} lastId the last message delivered: a reconnect resumes after it
 */

/**
 * @typedef {object} RealtimeEventMap
 * @property {{user: string, node: string, motd: string, data: unknown, reconnected: boolean, transport: string}} open a connection is up (its hello);
 *   transport: its kind, 'websocket' or 'sse'; data: what the application's connect hook attached (null = none) 
 * @property {{state: 'connecting' | 'open' | 'reconnecting' | 'closed', attempt: number}} state
 * @property {{room: Room, resumed: boolean}} joined a join or resume took effect (resumed: the room was ours already)
 * @property {{room: string, reason: 'elsewhere' | 'resume_failed', error?: ChatdError}} left the room is gone: left from another connection, or a resume was refused
 * @property {{message: Message, room: string}} message a message, once, in id order per room
 * @property {{room: string, user: string, state: 'joined' | 'left'}} presence
 * @property {{room: string, user: string}} typing another user is typing
 * @property {{key: string, value: SettingValue, version: number}} settings a live setting changed
 * @property {{id: string, text: string}} notice an admin notice
 * @property {{room: string, id: string}} message_removed an admin removed a message: hide it
 * @property {MatchEvent} matched a matchmaking ticket of the user was matched (on every connection of the user):
 *   take the seat with enter(room) within reserve_seconds
 * @property {MatchEvent} ticket_expired a matchmaking ticket of the user waited past its queue's max_wait_seconds
 *   (or a pending party's invitations lapsed)
 * @property {MatchEvent} party_invite the user is invited to a party (leader, players, expires): accept or decline
 *   its ticket before expires; it queues nobody until every invitee accepted
 * @property {MatchEvent} party_update a party of the user changed: user accepted (state pending, or waiting once
 *   every invitee did) or it was dissolved (state cancelled; reason declined, cancelled or offline)
 * @property {{room: string, error: ChatdError}} resume_gap what was missed is gone from history; the latest messages follow
 * @property {{error: ChatdError}} error a frame failed that no promise waits for (read, typing, a lost seat …)
 * @property {{code: number, reason: string, text: string, willReconnect: boolean, delay?: number, attempt: number}} disconnected a connection ended
 * @property {{code: number, reason: string, text: string, mayReconnect: boolean}} closed the client stopped for good (connect() starts it again)
 * @property {{action: 'kicked' | 'banned', text: string}} moderation an admin closed the connection
 * @property {import('./types.js').DirectMessage & {type: 'dm'}} dm a direct message of the user's, sent or received (every
 *   connection of the user, every node, no join needed)
 * @property {{type: 'dm_typing', conversation: string, from: string, ts: number}} dm_typing the other user of a conversation is typing
 * @property {{type: 'dm_read', conversation: string, user: string, id: string, unread: number}} dm_read the user marked a conversation read
 * @property {{type: 'dm_removed', conversation: string, id: string}} dm_removed an admin removed a direct message
 * @property {{type: 'dm_gap'}} dm_gap live direct messages may have been lost: resumeDirect the conversations you show
 * @property {{type: 'dm_sent', ref: string, conversation: string, id: string, ts: number, repeated?: boolean}} dm_sent a sendDirect was stored
 * @property {{type: 'dm_opened', ref: string, conversation: {id: string, with: string}}} dm_opened
 * @property {{type: 'dm_resumed', conversation: string, after: string, count: number, gap: boolean, ref: string}} dm_resumed a resumeDirect's replay is done
 * @property {ServerEvent} unknown an event of a type this SDK does not know
 */

export {};
