package web

import "github.com/chatd/chatd/protocol"

// maxJSONDepth bounds nesting in request bodies and WebSocket frames.
const maxJSONDepth = protocol.MaxJSONDepth

// decodeJSON decodes one JSON value from data into v strictly, as
// WebSocket frames are decoded (protocol.DecodeJSON): a single value,
// wrong types named by field, nesting deeper than maxJSONDepth refused.
// Unknown fields are ignored, so newer clients keep working against older
// servers.
func decodeJSON(data []byte, v any) error { return protocol.DecodeJSON(data, v) }
