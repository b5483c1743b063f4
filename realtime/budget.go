package realtime

import (
	"encoding/json"

	"github.com/chatd/chatd/rooms"
)

// MaxHistoryBytes is the most bytes of messages, as JSON, one history read
// answers (GET /rooms/{room}/messages and the admin room detail): the page
// ends at the last message that fits and says "more", and the reader asks
// again after its last id. The JSON is counted as sent, escapes included (a
// control character is 6 bytes), so 1,000 messages of 2,000 control
// characters (12 KB each) come back as pages of about 85, not 12 MB at once.
// A page always holds at least one message when there is one (a message is
// at most message.max_length × 6 bytes escaped, well under this budget).
const MaxHistoryBytes = 1 << 20

// MaxPollMessageBytes is the most bytes of messages, as JSON, one poll
// answers over all of the session's rooms together: the rooms are read in
// name order until it is spent; the rest stay dirty (the poll says "more")
// and the next poll goes on from the cursors this one moved.
const MaxPollMessageBytes = 1 << 20

// MessageSize is how many bytes m takes as JSON, escapes included.
func MessageSize(m rooms.Message) int {
	b, err := json.Marshal(m)
	if err != nil {
		return 0
	}
	return len(b)
}

// FitMessages returns the longest prefix of msgs whose JSON, with a comma
// between messages, fits in budget bytes (at least one message when msgs
// is not empty), how many bytes it takes, and whether msgs was cut.
func FitMessages(msgs []rooms.Message, budget int) (fit []rooms.Message, size int, cut bool) {
	for i, m := range msgs {
		n := MessageSize(m)
		if i > 0 {
			n++ // the comma
		}
		if i > 0 && size+n > budget {
			return msgs[:i], size, true
		}
		size += n
	}
	return msgs, size, false
}
