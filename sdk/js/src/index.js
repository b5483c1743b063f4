// @chatd/client: the JavaScript SDK of chatd (docs/PROTOCOL.md).

export {ChatdClient} from './rest.js';
export {RealtimeClient} from './realtime.js';
export {ChatdError, ErrorCodes, ClientCodes} from './errors.js';
export {CloseCodes, CloseReasons, closeReasonOf} from './close.js';
export {webSocketTransport} from './transport.js';
export {sseTransport} from './sse.js';
export {backoffDelay} from './backoff.js';
export {compareIds, normalizeId, newIdempotencyKey} from './ids.js';
export {TypedEventTarget} from './events.js';

/** @typedef {import('./types.js').Room} Room */
/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./types.js').Session} Session */
/** @typedef {import('./types.js').LobbySummary} LobbySummary */
/** @typedef {import('./types.js').Entry} Entry */
/** @typedef {import('./types.js').ScoreMode} ScoreMode */
/** @typedef {import('./types.js').Wallet} Wallet */
/** @typedef {import('./types.js').Item} Item */
/** @typedef {import('./types.js').Settings} Settings */
/** @typedef {import('./types.js').SettingDef} SettingDef */
/** @typedef {import('./types.js').SettingValue} SettingValue */
/** @typedef {import('./types.js').Presence} Presence */
/** @typedef {import('./types.js').Notice} Notice */
/** @typedef {import('./types.js').PollSection} PollSection */
/** @typedef {import('./types.js').PollData} PollData */
/** @typedef {import('./types.js').PollAnswer} PollAnswer */
/** @typedef {import('./rest.js').ClientOptions} ClientOptions */
/** @typedef {import('./rest.js').CallOptions} CallOptions */
/** @typedef {import('./rest.js').KeyedOptions} KeyedOptions */
/** @typedef {import('./rest.js').PollLoopOptions} PollLoopOptions */
/** @typedef {import('./rest.js').PollLoopError} PollLoopError */
/** @typedef {import('./realtime-types.js').RealtimeOptions} RealtimeOptions */
/** @typedef {import('./realtime-types.js').RealtimeEventMap} RealtimeEventMap */
/** @typedef {import('./realtime-types.js').Ack} Ack */
/** @typedef {import('./realtime-types.js').RoomState} RoomState */
/** @typedef {import('./transport.js').Transport} Transport */
/** @typedef {import('./transport.js').TransportFactory} TransportFactory */
/** @typedef {import('./transport.js').TransportHandlers} TransportHandlers */
/** @typedef {import('./transport.js').TransportOpen} TransportOpen */
/** @typedef {import('./sse.js').SSETransportOptions} SSETransportOptions */
/** @typedef {import('./transport.js').ServerEvent} ServerEvent */
/** @typedef {import('./transport.js').WebSocketConstructor} WebSocketConstructor */
/** @typedef {import('./http.js').RetryInfo} RetryInfo */
/** @typedef {import('./backoff.js').BackoffOptions} BackoffOptions */
/** @typedef {import('./close.js').ReconnectPolicy} ReconnectPolicy */
/** @typedef {import('./errors.js').ChatdErrorInit} ChatdErrorInit */
