-- item_buy: one purchase in one script, the Lua twin of Shop.Buy's
-- WATCH/MULTI/EXEC transaction (same keys, checks, writes and stored answer).
--
-- KEYS[1] item                  HASH stock, price
-- KEYS[2] buyer's balance       STRING integer coins
-- KEYS[3] buyer's inventory     HASH item -> count
-- KEYS[4] purchase counter      STRING (INCR)
-- KEYS[5] idempotency record    STRING JSON; optional (absent = no key)
-- ARGV[1] item name             (validated: [A-Za-z0-9_.-], no JSON escaping needed)
-- ARGV[2] qty                   decimal integer, 1..MaxQty
-- ARGV[3] idempotency TTL in ms
-- returns {fresh, record}: fresh is 1 when this call decided the outcome and
--   0 when it replays the record stored under KEYS[5]; record is the JSON
--   {"item","qty","error"} or {"item","qty","wallet":{"balance","items"}}.
--
-- Numbers are Lua doubles: exact because stock, balances and counts stay
-- at or below 2^53-1 (a cost above that is refused before it is used), and
-- formatted with %.0f so Redis never sees "1e+15".
local idem = KEYS[5]
if idem then
  local prior = redis.call('GET', idem)
  if prior then
    return {0, prior}
  end
end

local item, qty = ARGV[1], tonumber(ARGV[2])
local head = '{"item":"' .. item .. '","qty":' .. ARGV[2]

local function done(rec)
  if idem then
    redis.call('SET', idem, rec, 'PX', ARGV[3])
  end
  return {1, rec}
end

local f = redis.call('HMGET', KEYS[1], 'stock', 'price')
if not f[1] or not f[2] then
  return done(head .. ',"error":"unknown_item"}')
end
if tonumber(f[1]) < qty then
  return done(head .. ',"error":"sold_out"}')
end
local cost = qty * tonumber(f[2])
if cost > tonumber(redis.call('GET', KEYS[2]) or '0') then
  return done(head .. ',"error":"insufficient_funds"}')
end

redis.call('HINCRBY', KEYS[1], 'stock', '-' .. ARGV[2])
local balance = redis.call('DECRBY', KEYS[2], string.format('%.0f', cost))
redis.call('HINCRBY', KEYS[3], item, ARGV[2])
redis.call('INCR', KEYS[4])

local inv = redis.call('HGETALL', KEYS[3])
local items = {}
for i = 1, #inv, 2 do
  items[#items + 1] = '"' .. inv[i] .. '":' .. inv[i + 1]
end
return done(head .. ',"wallet":{"balance":' .. string.format('%.0f', balance) ..
  ',"items":{' .. table.concat(items, ',') .. '}}}')
