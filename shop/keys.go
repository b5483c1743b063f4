package shop

import (
	"github.com/chatd/chatd/internal/keyspace"
	"github.com/chatd/chatd/names"
)

// keys builds every key of one shop. All of them
// carry the shop's hash tag {shop:NAME}: a purchase touches the item, the
// buyer's balance and inventory, the idempotency record and the purchase
// counter in one transaction, so on Redis Cluster they must share one slot.
type keys struct {
	ks   keyspace.Space
	shop string
}

// item is the item's stock and price.
func (k keys) item(item string) string { return k.ks.Key("shop", k.shop, "item", item) } // HASH stock, price

// items lists the names of every stocked item.
func (k keys) items() string { return k.ks.Key("shop", k.shop, "items") } // SET item names

// balance is a user's coins.
func (k keys) balance(user string) string {
	return k.ks.Key("shop", k.shop, "balance", names.Canonical(user))
} // STRING int64

// inventory is what a user owns.
func (k keys) inventory(user string) string {
	return k.ks.Key("shop", k.shop, "inv", names.Canonical(user))
} // HASH item -> count

// idem is the first answer to a user's purchase with one Idempotency-Key.
// The user name holds no ':', so user and key cannot run into each other.
func (k keys) idem(user, key string) string {
	return k.ks.Key("shop", k.shop, "idem", names.Canonical(user), key)
} // STRING JSON record, TTL

// granted is the first answer to a grant to user with one idempotency key,
// "<amount> <balance after>".
func (k keys) granted(user, key string) string {
	return k.ks.Key("shop", k.shop, "granted", names.Canonical(user), key)
} // STRING, TTL

// purchases counts successful purchases.
func (k keys) purchases() string { return k.ks.Key("shop", k.shop, "purchases") } // STRING int64 (INCR)
