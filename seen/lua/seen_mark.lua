-- seen_mark.lua: set the bits of N items in a user's current seen-filter
-- generation, starting a new generation first whenever the current one has
-- counted its capacity (the oldest kept generation is dropped to make room).
--
-- KEYS[2s-1]  bits of generation slot s (string bitmap), s = 1..G
-- KEYS[2s]    meta of generation slot s (hash: g m k c n); generation g
--             lives in slot (g mod G) + 1
-- ARGV[1]     TTL of every generation written, milliseconds
-- ARGV[2]     capacity of a new generation, items
-- ARGV[3]     the largest bitmap, in bytes, rewritten whole (GET, change in
--             Lua, SET) rather than bit by bit with SETBIT
-- ARGV[4]     N, the number of items
-- ARGV[5]     number of geometries sent; then for each geometry three
--             arguments: m, k, and the N*k bit positions (item i's k in a
--             row), each 4 bytes big-endian. The first sizes new generations.
-- returns     {1, rotations} when marked, or {0, m, k} when the current
--             generation's geometry was not sent (nothing written)

local nslots = #KEYS / 2
local ttl = ARGV[1]
local capacity = tonumber(ARGV[2])
local readWhole = tonumber(ARGV[3])
local n = tonumber(ARGV[4])

-- geometry "m:k" -> its packed positions
local geo = {}
for j = 0, tonumber(ARGV[5]) - 1 do
  local at = 6 + 3 * j
  geo[ARGV[at] .. ':' .. ARGV[at + 1]] = ARGV[at + 2]
end
local first = {m = ARGV[6], k = tonumber(ARGV[7]), pos = ARGV[8]}

-- the current generation: the highest generation number kept
local cur
local curg = 0
for s = 1, nslots do
  local v = redis.call('HMGET', KEYS[2 * s], 'g', 'm', 'k', 'c', 'n')
  local g = tonumber(v[1])
  if g and g > curg then
    curg = g
    cur = {slot = s, m = v[2], k = tonumber(v[3]), c = tonumber(v[4]), n = tonumber(v[5])}
  end
end
if cur and cur.n < cur.c then
  cur.pos = geo[cur.m .. ':' .. cur.k]
  if not cur.pos then
    return {0, cur.m, cur.k}
  end
end

local byte = string.byte
local weight = {128, 64, 32, 16, 8, 4, 2, 1} -- of bit p % 8 in its byte

-- prepare gen for writes; a bitmap small enough is read whole, once
local function open(gen, fresh)
  gen.bits = KEYS[2 * gen.slot - 1]
  local bytes = math.ceil(tonumber(gen.m) / 8)
  if bytes > readWhole then
    if fresh then
      -- allocate all m bits at once: a bitmap grown bit by bit keeps about
      -- twice its size in spare room
      redis.call('SETBIT', gen.bits, tonumber(gen.m) - 1, 0)
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

-- write gen's changed bytes, count and TTL
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
  end
  redis.call('HSET', KEYS[2 * gen.slot], 'n', gen.n)
  redis.call('PEXPIRE', gen.bits, ttl)
  redis.call('PEXPIRE', KEYS[2 * gen.slot], ttl)
end

if cur and cur.pos then
  open(cur, false)
end
local rotations = 0
for i = 0, n - 1 do
  if not cur or cur.n >= cur.c then
    if cur and cur.pos then
      save(cur)
    end
    curg = curg + 1
    rotations = rotations + 1
    local s = curg % nslots + 1
    redis.call('DEL', KEYS[2 * s - 1], KEYS[2 * s])
    redis.call('HSET', KEYS[2 * s], 'g', curg, 'm', first.m, 'k', first.k, 'c', capacity, 'n', 0)
    cur = {slot = s, m = first.m, k = first.k, c = capacity, n = 0, pos = first.pos}
    open(cur, true)
  end
  local added = false
  local pos, k = cur.pos, cur.k
  for j = i * k * 4 + 1, (i + 1) * k * 4, 4 do
    local a, b, c, d = byte(pos, j, j + 3)
    if set(cur, a * 16777216 + b * 65536 + c * 256 + d) then
      added = true
    end
  end
  if added then
    cur.n = cur.n + 1
  end
end
save(cur)
return {1, rotations}
