package shop

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/chatd/chatd/internal/redisx"
)

//go:embed lua/item_buy.lua
var itemBuySrc string

var itemBuyScript = redisx.NewScript("shop.item_buy", itemBuySrc)

// BuyLua is Buy done by one Lua script (lua/item_buy.lua) instead of a
// WATCH/MULTI/EXEC transaction: same keys, checks, writes, counter,
// idempotency and errors, one round trip and never a retry, at the price of
// blocking the shard for the script's run. chatd serves purchases with Buy;
// BuyLua exists for the comparison in the benchmarks (see the package doc).
func (s *Shop) BuyLua(ctx context.Context, user, item string, qty int64, idemKey string) (Wallet, error) {
	if err := checkBuy(user, item, qty, idemKey); err != nil {
		return Wallet{}, err
	}
	k := s.keys
	keys := []string{k.item(item), k.balance(user), k.inventory(user), k.purchases()}
	if idemKey != "" {
		keys = append(keys, k.idem(user, idemKey))
	}
	var rec record
	fresh := false
	buy := func(rdb redis.Scripter) ([]any, error) {
		return itemBuyScript.Run(ctx, rdb, keys, item, strconv.FormatInt(qty, 10), s.cfg.IdempotencyTTL.Milliseconds()).Slice()
	}
	var err error
	if !s.durable() {
		var res []any
		if res, err = buy(s.rdb); err == nil {
			err = decodeScriptReply(res, &rec, &fresh)
		}
		return s.finish(ctx, "lua", user, item, qty, rec, fresh, err)
	}
	// Under DurabilityReplica the script and its WAIT share a connection
	// (durability.go), as Buy's transaction and its WAIT do.
	err = s.pinned(ctx, keys[0], func(tx *redis.Tx) error {
		res, err := buy(tx)
		if err == nil {
			err = decodeScriptReply(res, &rec, &fresh)
		}
		switch {
		case err != nil || rec.Error != "" || rec.Item != item || rec.Qty != qty:
			return err
		case fresh || len(keys) < 5:
			return s.replicated(ctx, tx)
		}
		return s.replayed(ctx, tx, keys[4], res[1].(string))
	})
	return s.finish(ctx, "lua", user, item, qty, rec, fresh, err)
}

// decodeScriptReply reads item_buy's {fresh, record} reply.
func decodeScriptReply(res []any, rec *record, fresh *bool) error {
	if len(res) != 2 {
		return errors.New("item_buy: reply is not {fresh, record}")
	}
	f, ok1 := res[0].(int64)
	raw, ok2 := res[1].(string)
	if !ok1 || !ok2 {
		return errors.New("item_buy: reply is not {fresh, record}")
	}
	*fresh = f == 1
	return json.Unmarshal([]byte(raw), rec)
}
