package hooks

import "github.com/chatd/chatd/internal/keyspace"

// matchAnswerKey holds the match hook's answer for one match (its JSON
// reply, or "{}" when the hook failed open), so that the matcher calling
// the hook again for the same match (at least once per match) tells the
// same data; it lives MatchAnswerTTL.
func matchAnswerKey(ks keyspace.Space, match string) string { return ks.Key("match", match, "hook") } // STRING
