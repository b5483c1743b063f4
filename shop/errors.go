package shop

import (
	"github.com/chatd/chatd/errcode"

	"errors"
	"fmt"
)

// Sentinel errors. Every error a Shop method returns wraps one of these (or
// names.ErrBadName, or a Redis error) with the operation and the names
// involved; compare with errors.Is.
var (
	// ErrUnknownItem: the item was never stocked (404 unknown_item).
	ErrUnknownItem = errcode.New(errcode.UnknownItem, "shop: unknown item")
	// ErrSoldOut: fewer units are in stock than asked for (409 sold_out).
	ErrSoldOut = errcode.New(errcode.SoldOut, "shop: sold out")
	// ErrInsufficientFunds: the buyer's balance is below the price (409 insufficient_funds).
	ErrInsufficientFunds = errcode.New(errcode.InsufficientFunds, "shop: insufficient funds")
	// ErrConflict: other writers kept changing the watched keys through
	// every retry; nothing was bought, the caller may retry later (409 conflict).
	ErrConflict = errcode.New(errcode.Conflict, "shop: too much contention, retry later")
	// ErrBadValue: a quantity, amount, stock or price is out of range (400 bad_value).
	ErrBadValue = errcode.New(errcode.BadValue, "shop: value out of range")
	// ErrBalanceOverflow: a grant would push a balance above MaxBalance (400 bad_value).
	ErrBalanceOverflow = errcode.New(errcode.BadValue, "shop: balance would exceed the maximum")
	// ErrBadIdempotencyKey: the key is longer than MaxIdempotencyKey bytes or
	// holds other than printable ASCII without spaces (400 bad_request).
	ErrBadIdempotencyKey = errcode.New(errcode.BadRequest, "shop: bad idempotency key")
	// ErrIdempotencyMismatch: the key was already used by this user for a
	// different purchase (another item or quantity) (400 bad_request).
	ErrIdempotencyMismatch = errcode.New(errcode.BadRequest, "shop: idempotency key was used for a different purchase")
	// ErrNotReplicated: under Config.Durability DurabilityReplica, no
	// replica acknowledged the write within Config.DurabilityTimeout (503
	// not_durable). The write WAS applied on the master, and a failover
	// now may lose it: a purchase or grant is retried with its idempotency
	// key, which answers the first write's result once a replica holds it.
	ErrNotReplicated = errcode.New(errcode.NotDurable, "shop: written but not yet replicated")
)

// outcome codes stored in idempotency records, as docs/PROTOCOL.md spells them.
const (
	codeSoldOut      = "sold_out"
	codeInsufficient = "insufficient_funds"
	codeUnknownItem  = "unknown_item"
)

// errOf maps a stored outcome code to its sentinel.
func errOf(code string) error {
	switch code {
	case codeSoldOut:
		return ErrSoldOut
	case codeInsufficient:
		return ErrInsufficientFunds
	case codeUnknownItem:
		return ErrUnknownItem
	}
	return errors.New("shop: unknown outcome " + code)
}

// refusal is the error of a refused purchase, with what the refusal saw:
// "shop: insufficient funds: not enough coins: balance 3, price 7".
func refusal(rec record) error {
	err := errOf(rec.Error)
	switch rec.Error {
	case codeInsufficient:
		return fmt.Errorf("%w: not enough coins: balance %d, price %d", err, rec.Balance, rec.Cost)
	case codeSoldOut:
		return fmt.Errorf("%w: %d %s in stock, %d asked for", err, rec.Stock, rec.Item, rec.Qty)
	case codeUnknownItem:
		return fmt.Errorf("%w: %q was never stocked (GET /api/v1/shop/items lists what is)", err, rec.Item)
	}
	return err
}
