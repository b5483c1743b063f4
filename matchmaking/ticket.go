package matchmaking

import (
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatd/chatd/names"
)

// Ticket is a request to be matched: one user, or a party that plays
// together, in one queue.
type Ticket struct {
	// ID is the ticket's id (26 characters of [A-Z2-7]), set by Submit.
	ID string `json:"id"`
	// Queue is the queue the ticket waits in.
	Queue string `json:"queue"`
	// User is the user who submitted the ticket.
	User string `json:"user"`
	// Party lists the other users who join with User (at most
	// Queue.MaxParty-1, none twice, not User). They are matched together,
	// into one match, or not at all. The caller checks that their sessions
	// are live.
	Party []string `json:"party,omitempty"`
	// Skill is the rating the match is made on: finite, |Skill| ≤ 1e9.
	Skill float64 `json:"skill"`
	// Attributes must be equal, key for key, for tickets to be matched
	// (region, mode): at most 8, keys 1–32 of [a-z0-9_-], values 1–64 of
	// [A-Za-z0-9_.:-].
	Attributes map[string]string `json:"attributes,omitempty"`
	// Created is when the ticket was submitted, by the submitting node's
	// clock (milliseconds); for a party, when its last invitee accepted
	// (its wait in the queue starts then), and when it was formed while
	// pending.
	Created time.Time `json:"created"`
	// Accepted lists the party members (canonical names) who accepted
	// their invitation (Invite, Accept); empty for a ticket of one.
	Accepted []string `json:"accepted,omitempty"`
	// Expires is when a pending party's invitations lapse; zero for a
	// ticket submitted alone.
	Expires time.Time `json:"expires,omitzero"`
}

// Players returns the ticket's users: User, then Party.
func (t Ticket) Players() []string { return append([]string{t.User}, t.Party...) }

// Size is the number of players the ticket brings.
func (t Ticket) Size() int { return 1 + len(t.Party) }

// Bounds of a ticket.
const (
	MaxAttributes = 8  // attributes of a ticket
	MaxAttrKey    = 32 // characters of an attribute key
	MaxAttrValue  = 64 // characters of an attribute value
	ticketIDLen   = 26 // crypto/rand.Text: 128 bits of base32
)

// State is where a ticket is: waiting, or how it ended.
type State string

// The states of a ticket. Only Pending and Waiting change; the others are
// final. A pending ticket is a party whose invitees have not all accepted:
// it is in no queue index.
const (
	Pending   State = "pending"
	Waiting   State = "waiting"
	Matched   State = "matched"
	Expired   State = "expired"
	Cancelled State = "cancelled"
)

// Status is what Status and Cancel report about a ticket.
type Status struct {
	// Ticket is the ticket as submitted.
	Ticket Ticket `json:"ticket"`
	// State is waiting, matched, expired or cancelled.
	State State `json:"state"`
	// Ended is when it left the queue; zero while waiting.
	Ended time.Time `json:"ended,omitzero"`
	// Match is the match it is in, when State is Matched (nil when the
	// match's record has already expired).
	Match *Match `json:"match,omitempty"`
	// TroubleSince, on a waiting ticket, is when the queue's matcher began
	// to fail round after round: no match forms until it recovers (the
	// ticket still expires at its max wait). Zero otherwise.
	TroubleSince time.Time `json:"trouble_since,omitzero"`
}

// Match is a formed match.
type Match struct {
	// ID is "<queue>-<seq>": unique in the deployment while Redis keeps
	// its data (the sequence is never reset).
	ID string `json:"id"`
	// Queue is the queue it was formed in.
	Queue string `json:"queue"`
	// Seq is the match's number in its queue, from 1.
	Seq int64 `json:"seq"`
	// Tickets are the matched tickets: the oldest first, then the others
	// closest in skill to the ticket whose window chose them first.
	Tickets []Ticket `json:"tickets"`
	// Players lists every matched user, ticket by ticket.
	Players []string `json:"players"`
	// Attributes are the attributes every ticket shares.
	Attributes map[string]string `json:"attributes,omitempty"`
	// Created is when the match was formed, by the matcher's clock.
	Created time.Time `json:"created"`
	// Fence is the fence of the queue lock under which it was formed.
	Fence int64 `json:"fence"`
}

// check validates t for queue q and returns it normalised (party sorted,
// -0 skill as 0, attributes never nil).
func (t Ticket) check(q Queue) (Ticket, error) {
	if err := names.User(t.User); err != nil {
		return t, fmt.Errorf("%w: %w", ErrBadName, err)
	}
	if t.Size() > q.MaxParty {
		return t, fmt.Errorf("%w: a party of %d; queue %s takes at most %d players per ticket", ErrBadTicket, t.Size(), q.Name, q.MaxParty)
	}
	// One person, one place: names differing only in case are one user
	// (names.Canonical, as at sign-in), so "SOLO" in solo's party is solo
	// twice. The names keep the case they were given.
	party := slices.Clone(t.Party)
	slices.SortFunc(party, func(a, b string) int { return strings.Compare(names.Canonical(a), names.Canonical(b)) })
	self := names.Canonical(t.User)
	for i, p := range party {
		if err := names.User(p); err != nil {
			return t, fmt.Errorf("%w: party: %w", ErrBadName, err)
		}
		if c := names.Canonical(p); c == self || (i > 0 && names.Canonical(party[i-1]) == c) {
			return t, fmt.Errorf("%w: the party names %s twice (names differing only in case are one user)", ErrBadTicket, p)
		}
	}
	t.Party = party
	if math.IsNaN(t.Skill) || math.IsInf(t.Skill, 0) || math.Abs(t.Skill) > MaxSkill {
		return t, fmt.Errorf("%w: skill must be a finite number from -1e9 to 1e9", ErrBadTicket)
	}
	if t.Skill == 0 {
		t.Skill = 0 // -0 sorts below +0 in the pool; there is one zero
	}
	if len(t.Attributes) > MaxAttributes {
		return t, fmt.Errorf("%w: %d attributes; at most %d", ErrBadTicket, len(t.Attributes), MaxAttributes)
	}
	attrs := make(map[string]string, len(t.Attributes))
	for k, v := range t.Attributes {
		if !validChars(k, MaxAttrKey, "abcdefghijklmnopqrstuvwxyz0123456789_-") {
			return t, fmt.Errorf("%w: attribute key %q must be 1 to %d of a-z 0-9 _ -", ErrBadTicket, clip(k), MaxAttrKey)
		}
		if !validChars(v, MaxAttrValue, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") {
			return t, fmt.Errorf("%w: attribute %s: value %q must be 1 to %d of A-Z a-z 0-9 _ . : -", ErrBadTicket, k, clip(v), MaxAttrValue)
		}
		attrs[k] = v
	}
	t.Attributes = attrs
	t.Queue = q.Name
	return t, nil
}

func validChars(s string, max int, set string) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(set, s[i]) < 0 {
			return false
		}
	}
	return true
}

// newTicketID returns 128 random bits as 26 characters of [A-Z2-7].
func newTicketID() string { return crand.Text() }

// checkTicketID reports whether id is shaped like a ticket id, before it
// becomes part of a key.
func checkTicketID(id string) bool {
	if len(id) != ticketIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// attrsJSON is the canonical JSON of attributes (keys sorted, as
// encoding/json writes maps): equal attributes, equal strings.
func attrsJSON(a map[string]string) string {
	if a == nil {
		a = map[string]string{}
	}
	b, _ := json.Marshal(a) // map[string]string: cannot fail
	return string(b)
}

// The pool entry of a ticket, the member of the pool and age ZSETs:
//
//	bucket  16 hex  the first 64 bits of SHA-256 of the attributes' canonical JSON
//	skill   16 hex  the skill's float64 bits, made to sort as the numbers do
//	size     2 hex  the players the ticket brings
//	id      26      the ticket id
//
// Every entry of the pool has score 0, so [ZRANGEBYLEX] orders them by
// bucket, then skill: one ZSET holds every bucket, and a window of one
// bucket is a lex range, which the scripts compute from ARGV without ever
// naming a key of their own. Two attribute sets whose buckets collide
// share a range; the formation script compares the attributes themselves,
// so a collision can refuse a match, never make a wrong one.
const (
	entryBucket = 16
	entrySkill  = 16
	entrySize   = 2
	entryHead   = entryBucket + entrySkill + entrySize
)

func bucketOf(attrs string) string {
	sum := sha256.Sum256([]byte(attrs))
	return hex.EncodeToString(sum[:entryBucket/2])
}

// skillKey encodes f so that the strings sort as the numbers: a positive
// number (sign bit clear) gets its sign bit set, a negative one all its
// bits flipped. lua/queue_pick.lua does the same in plain Lua (math.frexp, math.ldexp).
func skillKey(f float64) string {
	b := math.Float64bits(f)
	if b>>63 == 0 {
		b |= 1 << 63
	} else {
		b = ^b
	}
	return fmt.Sprintf("%016x", b)
}

// skillOfKey decodes skillKey.
func skillOfKey(s string) (float64, bool) {
	b, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) != entrySkill {
		return 0, false
	}
	if b>>63 == 1 {
		b &^= 1 << 63
	} else {
		b = ^b
	}
	return math.Float64frombits(b), true
}

func entryOf(bucket string, skill float64, size int, id string) string {
	return bucket + skillKey(skill) + fmt.Sprintf("%02x", size) + id
}

// idOfEntry returns the ticket id of a pool entry.
func idOfEntry(e string) (string, bool) {
	if len(e) != entryHead+ticketIDLen {
		return "", false
	}
	id := e[entryHead:]
	return id, checkTicketID(id)
}

// ms and fromMS convert times to and from Unix milliseconds, the unit of
// every time in Redis.
func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMS(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// ticketOf decodes a ticket's hash.
func ticketOf(queue, id string, h map[string]string) (Ticket, error) {
	skill, err := strconv.ParseFloat(h["skill"], 64)
	if err != nil {
		return Ticket{}, fmt.Errorf("%w: ticket %s has skill %q", errUnexpectedReply, id, h["skill"])
	}
	t := Ticket{ID: id, Queue: queue, User: h["user"], Skill: skill, Created: fromMS(h["created"])}
	if p := h["party"]; p != "" {
		t.Party = strings.Fields(p)
	}
	if a := h["accepted"]; a != "" {
		t.Accepted = strings.Fields(a)
	}
	t.Expires = fromMS(h["expires"])
	if a := h["attrs"]; a != "" && a != "{}" {
		if err := json.Unmarshal([]byte(a), &t.Attributes); err != nil {
			return Ticket{}, fmt.Errorf("%w: ticket %s has attributes %q", errUnexpectedReply, id, clip(a))
		}
	}
	return t, nil
}

// player is a ticket as match_form.lua records it in the match (strings
// only: Lua's cjson would round numbers to 14 digits).
type player struct {
	ID      string `json:"id"`
	User    string `json:"user"`
	Party   string `json:"party"`
	Skill   string `json:"skill"`
	Created string `json:"created"`
}

// matchOf decodes a match record: its hash, or the same fields from the
// formation script's reply.
func matchOf(queue string, h map[string]string) (Match, error) {
	seq, err := strconv.ParseInt(h["seq"], 10, 64)
	if err != nil {
		return Match{}, fmt.Errorf("%w: match record with seq %q", errUnexpectedReply, h["seq"])
	}
	fence, _ := strconv.ParseInt(h["fence"], 10, 64)
	m := Match{ID: queue + "-" + strconv.FormatInt(seq, 10), Queue: queue, Seq: seq,
		Created: fromMS(h["created"]), Fence: fence}
	if a := h["attrs"]; a != "" && a != "{}" {
		if err := json.Unmarshal([]byte(a), &m.Attributes); err != nil {
			return Match{}, fmt.Errorf("%w: match %s has attributes %q", errUnexpectedReply, m.ID, clip(a))
		}
	}
	var ps []player
	if err := json.Unmarshal([]byte(h["players"]), &ps); err != nil {
		return Match{}, fmt.Errorf("%w: match %s has players %q", errUnexpectedReply, m.ID, clip(h["players"]))
	}
	for _, p := range ps {
		t, err := ticketOf(queue, p.ID, map[string]string{"user": p.User, "party": p.Party, "skill": p.Skill, "created": p.Created})
		if err != nil {
			return Match{}, err
		}
		t.Attributes = maps.Clone(m.Attributes)
		m.Tickets = append(m.Tickets, t)
		m.Players = append(m.Players, t.Players()...)
	}
	return m, nil
}
