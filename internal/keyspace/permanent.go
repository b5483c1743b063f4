package keyspace

import (
	"path"
	"strings"
)

// Kind is a kind of key that chatd keeps without a TTL. Every other key
// chatd writes carries a TTL, so that nothing a client does grows Redis
// without bound; web's keyspace audit (TestKeyspaceAudit) drives every
// endpoint and frame, scans the whole prefix and fails on a key without a
// TTL that no Kind of Permanent matches.
type Kind struct {
	// Name is the kind's short name, as README.md ("Security", the
	// "state growth" row) lists it; several Kinds may share one Name.
	Name string
	// Pattern matches key names with "prefix:" stripped, in path.Match
	// syntax: '*' is any run of characters ('/' excepted, which no chatd
	// key holds), '?' one character; '{' and '}' are literal.
	Pattern string
	// Owner is the package that writes the key.
	Owner string
	// Holder, when not empty, makes the kind permanent only while it is in
	// use: a key of the kind may lack a TTL only while the key Holder of
	// the same hash-tag unit exists ("members" for a lobby: while the lobby
	// has a seat). When the holder goes, the owner gives the kind a TTL.
	Holder string
	// Listed, when not empty, names the setting whose comma-separated list
	// must name the key's unit id for the key to be permanent
	// ("boards.permanent" for all-time boards).
	Listed string
	// Why says why the kind needs no TTL and what bounds its number and size.
	Why string
}

// Permanent lists every kind of key kept without a TTL: the one place that
// says so. README.md's "state growth" row lists their Names (a test keeps
// the two in step).
var Permanent = []Kind{
	{Name: "settings", Owner: "settings", Pattern: "{settings:live}:values",
		Why: "the live settings set away from their default: one hash, one field per registry key"},
	{Name: "settings", Owner: "settings", Pattern: "{settings:live}:version",
		Why: "the settings write counter: one integer"},
	{Name: "shop", Owner: "shop", Pattern: "{shop:*}:items",
		Why: "the stocked item names: written by admins only"},
	{Name: "shop", Owner: "shop", Pattern: "{shop:*}:item:*",
		Why: "an item's stock and price: written by admins only"},
	{Name: "shop", Owner: "shop", Pattern: "{shop:*}:purchases",
		Why: "the shop's purchase counter: one integer"},
	{Name: "wallets", Owner: "shop", Pattern: "{shop:*}:balance:*",
		Why: "a user's coins, which must not vanish; created only by an admin grant"},
	{Name: "wallets", Owner: "shop", Pattern: "{shop:*}:inv:*",
		Why: "what a user bought, which must not vanish; created only by a purchase paid with granted coins"},
	{Name: "counters", Owner: "rooms", Pattern: "stats:*",
		Why: "global counters (messages, rooms): one integer each"},
	{Name: "notices", Owner: "notices", Pattern: "{notices:global}:stream",
		Why: "admin notices: one stream, written by admins only and capped"},
	{Name: "indexes", Owner: "moderation", Pattern: "{mods:all}:*",
		Why: "the mute and ban listings: admin-written, entries past their end trimmed on every listing"},
	{Name: "indexes", Owner: "presence", Pattern: "presence:online",
		Why: "online users scored by expiry: one entry per user online, expired ones trimmed"},
	{Name: "indexes", Owner: "dirty", Pattern: "dirty:sessions",
		Why: "REST sessions scored by expiry: expired ones swept by every node"},
	{Name: "indexes", Owner: "rooms", Pattern: "rooms:lobbies",
		Why: "lobbies with seats, for the sweeper: an idle lobby leaves it"},
	{Name: "indexes", Owner: "rooms", Pattern: "{rooms:index}:*",
		Why: "the lobby listing: lobbies with seats, tombstones trimmed after 10 minutes"},
	{Name: "seated lobbies", Owner: "rooms", Pattern: "{lobby:*}:*", Holder: "members",
		Why: "a lobby's rooms and seats while it has a seat (seats are leases the sweeper reaps); its last seat gives every key of the lobby the idle TTL (room histories always carry one)"},
	{Name: "counters", Owner: "matchmaking", Pattern: "{mm:*}:seq",
		Why: "a matchmaking queue's match counter: one integer per queue an operator defined; going back would reuse match ids"},
	{Name: "counters", Owner: "lock", Pattern: "{mm:*}:fence",
		Why: "a matchmaking queue's lock fence: one integer per queue an operator defined; going back would let a paused matcher through"},
	{Name: "declared boards", Owner: "ranking", Pattern: "{lb:*}:*", Listed: "boards.permanent",
		Why: "all-time boards an operator named permanent; every other all-time board expires 30 days after its last post"},
}

// Strip returns key without the Space's "prefix:", and false when key is
// not in the Space.
func (s Space) Strip(key string) (string, bool) {
	return strings.CutPrefix(key, s.Prefix()+":")
}

// Unit returns the hash-tag unit of a key name: kind and id of its first
// "{kind:id}", and false when it has none.
func Unit(name string) (kind, id string, ok bool) {
	i := strings.IndexByte(name, '{')
	if i < 0 {
		return "", "", false
	}
	j := strings.IndexByte(name[i:], '}')
	if j < 0 {
		return "", "", false
	}
	return strings.Cut(name[i+1:i+j], ":")
}

// Matches reports whether the key name (prefix stripped) is of kind k, by
// Pattern alone (Holder and Listed are for the caller to check).
func (k Kind) Matches(name string) bool {
	ok, err := path.Match(k.Pattern, name)
	return err == nil && ok
}

// HolderKey returns the name (prefix stripped) of the key whose existence
// keeps name, of kind k, without a TTL: Holder in name's hash-tag unit. It
// returns "" when k has no Holder or name no hash tag.
func (k Kind) HolderKey(name string) string {
	if k.Holder == "" {
		return ""
	}
	i := strings.IndexByte(name, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(name[i:], '}')
	if j < 0 {
		return ""
	}
	return name[:i+j+1] + ":" + k.Holder
}

// PermanentKinds returns the Kinds of Permanent whose Pattern matches the
// key name (prefix stripped), in list order; none when the key must carry
// a TTL.
func PermanentKinds(name string) []Kind {
	var out []Kind
	for _, k := range Permanent {
		if k.Matches(name) {
			out = append(out, k)
		}
	}
	return out
}
