-- seen_mark.lua: set the bits of N items in the newest generation of a
-- user's scalable seen-filter, starting a new, larger generation first
-- whenever the newest one has counted its capacity, and dropping the oldest
-- generations the filter no longer needs.
--
-- KEYS[1]     the filter's description (hash): field "<g>" = "m k c n" for
--             each kept generation g (bits, hashes, capacity, items counted)
-- KEYS[1+s]   bits of slot s (string bitmap), s = 1..S; generation g lives
--             in slot (g mod S) + 1
-- ARGV[1]     TTL of every key of the filter, milliseconds (all refreshed)
-- ARGV[2]     R: the oldest generation is dropped when the older ones
--             without it still hold at least R items (capacities)
-- ARGV[3]     the largest bitmap, in bytes, rewritten whole (GET, change in
--             Lua, SET) rather than bit by bit with SETBIT
-- ARGV[4]     N, the number of items
-- ARGV[5]     K, hash values sent per item
-- ARGV[6]     T, the number of schedule entries; then T triples m, k, c:
--             the size of generation 0, 1, ..., T-1; generation g >= T takes
--             the last one
-- ARGV[7+3T]  the N*K hash values (item i's K in a row), each 8 bytes
--             big-endian: bit j of a generation of m bits and k hashes is
--             value j mod m, j < k (bloom/v3's Locations)
-- returns     {1, generations started}; or {0, k} when a kept generation
--             needs k > K hash values (nothing written)

local meta = KEYS[1]
local nslots = #KEYS - 1
local ttl = ARGV[1]
local keep = tonumber(ARGV[2])
local readWhole = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local K = tonumber(ARGV[5])
local nsched = tonumber(ARGV[6])
local sched = {}
for t = 0, nsched - 1 do
  sched[t] = {m = tonumber(ARGV[7 + 3 * t]), k = tonumber(ARGV[8 + 3 * t]), c = tonumber(ARGV[9 + 3 * t])}
end
local pos = ARGV[7 + 3 * nsched]

local function bitsKey(g)
  return KEYS[2 + g % nslots]
end

-- the kept generations, oldest first
local gens = {}
local all = redis.call('HGETALL', meta)
for i = 1, #all, 2 do
  local m, k, c, cnt = string.match(all[i + 1], '^(%d+) (%d+) (%d+) (%d+)$')
  if m then
    gens[#gens + 1] = {g = tonumber(all[i]), m = tonumber(m), k = tonumber(k), c = tonumber(c), n = tonumber(cnt)}
  end
end
table.sort(gens, function(a, b) return a.g < b.g end)
for _, gen in ipairs(gens) do
  if gen.k > K then
    return {0, gen.k}
  end
end

local byte = string.byte
local weight = {128, 64, 32, 16, 8, 4, 2, 1} -- of bit p % 8 in its byte

-- bit j of item i (0-based) in gen: the 64-bit hash value mod m, exactly
-- in doubles (every term is below 2^48): v = (a b)·2^48 + (c d)·2^32 +
-- (e f g h), with A = 2^48 mod m and B = 2^32 mod m
local function bit(i, j, gen)
  local at = (i * K + j) * 8 + 1
  local a, b, c, d, e, f, g, h = byte(pos, at, at + 7)
  return ((a * 256 + b) * gen.A + (c * 256 + d) * gen.B + ((e * 256 + f) * 256 + g) * 256 + h) % gen.m
end

-- prepare gen for writes; a bitmap small enough is read whole, once
local function open(gen, fresh)
  gen.bits, gen.open = bitsKey(gen.g), true
  gen.A, gen.B = 281474976710656 % gen.m, 4294967296 % gen.m -- 2^48, 2^32
  local bytes = math.ceil(gen.m / 8)
  if bytes > readWhole then
    if fresh then
      -- allocate all m bits at once: a bitmap grown bit by bit keeps about
      -- twice its size in spare room
      redis.call('SETBIT', gen.bits, gen.m - 1, 0)
    end
    return
  end
  local s = ''
  if not fresh then
    s = redis.call('GET', gen.bits) or ''
  end
  if #s < bytes then
    s = s .. string.rep('\0', bytes - #s)
  end
  gen.str, gen.changed, gen.order = s, {}, {}
end

-- set bit p of gen; true when it was not set before
local function set(gen, p)
  if not gen.str then
    return redis.call('SETBIT', gen.bits, p, 1) == 0
  end
  local r = p % 8
  local i = (p - r) / 8 + 1
  local w = weight[r + 1]
  local changed = gen.changed
  local b = changed[i]
  if not b then
    b = byte(gen.str, i)
    changed[i] = b
    gen.order[#gen.order + 1] = i
  end
  if b % (w + w) >= w then
    return false
  end
  changed[i] = b + w
  return true
end

-- write gen's changed bytes and count
local function save(gen)
  if gen.str and #gen.order > 0 then
    table.sort(gen.order)
    -- joined in chunks: one table.concat of thousands of parts overflows
    -- the registry of miniredis' Lua
    local chunks, parts, from = {}, {}, 1
    for _, i in ipairs(gen.order) do
      parts[#parts + 1] = string.sub(gen.str, from, i - 1)
      parts[#parts + 1] = string.char(gen.changed[i])
      from = i + 1
      if #parts >= 128 then
        chunks[#chunks + 1] = table.concat(parts)
        parts = {}
      end
    end
    parts[#parts + 1] = string.sub(gen.str, from)
    chunks[#chunks + 1] = table.concat(parts)
    redis.call('SET', gen.bits, table.concat(chunks))
    gen.str, gen.changed, gen.order = nil, nil, nil
  end
  redis.call('HSET', meta, gen.g, gen.m .. ' ' .. gen.k .. ' ' .. gen.c .. ' ' .. gen.n)
end

-- start generation g: drop the oldest kept generations while the others
-- still hold `keep` items (and while the slots are all taken), then make g
-- with the schedule's size for it
local function start(g)
  local held = 0
  for _, gen in ipairs(gens) do
    held = held + gen.c
  end
  while #gens > 0 and (held - gens[1].c >= keep or #gens >= nslots) do
    local old = table.remove(gens, 1)
    held = held - old.c
    redis.call('HDEL', meta, old.g)
    redis.call('DEL', bitsKey(old.g))
  end
  local size = sched[math.min(g, nsched - 1)]
  local gen = {g = g, m = size.m, k = size.k, c = size.c, n = 0}
  redis.call('DEL', bitsKey(g))
  gens[#gens + 1] = gen
  open(gen, true)
  return gen
end

local cur = gens[#gens]
if cur and cur.n < cur.c then
  open(cur, false)
end
local started = 0
for i = 0, n - 1 do
  if not cur or cur.n >= cur.c then
    local g = 0
    if cur then
      if cur.open then
        save(cur)
      end
      g = cur.g + 1
    end
    cur = start(g)
    started = started + 1
  end
  local added = false
  for j = 0, cur.k - 1 do
    if set(cur, bit(i, j, cur)) then
      added = true
    end
  end
  if added then
    cur.n = cur.n + 1
  end
end
save(cur)
redis.call('PEXPIRE', meta, ttl)
for _, gen in ipairs(gens) do
  redis.call('PEXPIRE', bitsKey(gen.g), ttl)
end
return {1, started}
