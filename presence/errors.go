package presence

import "errors"

// ErrBadNode is returned, wrapped with the operation, for an empty node id or
// one longer than 128 bytes.
var ErrBadNode = errors.New("presence: bad node id")
