-- queue_pick.lua: choose the next matches and expiries of a queue, without
-- changing any ticket (match_form.lua, fenced, does that). Also
-- acknowledges announced outbox entries and reserves match numbers.
--
-- KEYS[1]  pool    ZSET  entry -> 0 (lex order: bucket, skill)
-- KEYS[2]  age     ZSET  entry -> created ms
-- KEYS[3]  outbox  ZSET  "m:SEQ" / "x:TICKET" not yet announced
-- KEYS[4]  seq     STRING the match counter
-- KEYS[5]  fresh   LIST  entries submitted and not yet seeded, oldest first
-- KEYS[6]  sweep   STRING the pool entry the sweep seeded last
-- ARGV[1]  now, Unix ms
-- ARGV[2]  min players      ARGV[3]  max players
-- ARGV[4]  window           ARGV[5]  widening per second
-- ARGV[6]  cutoff, Unix ms: a ticket created at or before it has waited
--          its max wait and is to expire
-- ARGV[7]  oldest seeds: how many of the oldest tickets try to form a match
-- ARGV[8]  most matches to choose  ARGV[9]  most expiries to choose
-- ARGV[10] candidates read on each side of a seed
-- ARGV[11] fresh seeds: how many fresh entries are taken as seeds
-- ARGV[12] sweep seeds: how many pool entries after the sweep's are seeds
-- ARGV[13..] outbox members announced since the last call (ZREM'd first)
--
-- Selection: seeds are, in this order, the oldest tickets, the fresh
-- ones (each submitted ticket once, in submission order: taken off the
-- fresh list) and the next ones of a sweep over the pool (lex order,
-- wrapping round). A seed's window is window + widening × its wait; the
-- waiting tickets of its bucket within that window are taken closest
-- skill first while the players fit in max (a party counts all its
-- members and is never split); the match is chosen when it has at least
-- min players. Each ticket is chosen at most once per call. The work is
-- bounded by the seeds: each reads at most 2 × ARGV[10] candidates.
--
-- Returns {depth, oldest created ms or -1, outbox size, first reserved
-- match number or 0, {{entry, ...} per match: the oldest, then the others
-- closest skill first}, {entry of
-- each ticket to expire}, fresh entries left}.
local pool, age, outbox, fresh, sweep = KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6]
local now = tonumber(ARGV[1])
local min_size, max_size = tonumber(ARGV[2]), tonumber(ARGV[3])
local window, widen = tonumber(ARGV[4]), tonumber(ARGV[5])
local cutoff = tonumber(ARGV[6])
local n_seeds, max_matches = tonumber(ARGV[7]), tonumber(ARGV[8])
local max_expired, scan = tonumber(ARGV[9]), tonumber(ARGV[10])
local n_fresh, n_sweep = tonumber(ARGV[11]), tonumber(ARGV[12])

if #ARGV >= 13 then
  redis.call('ZREM', outbox, unpack(ARGV, 13))
end

-- IEEE 754 binary64 in plain Lua: Redis's Lua has struct.pack, the
-- embedded Redis (miniredis, gopher-lua) has not, so both use math.frexp
-- and math.ldexp, exact for every finite double. bytes_to_float reads the
-- 8 big-endian bytes of a double, float_to_bytes writes them. Infinity is
-- 1/0: gopher-lua's math.huge is the largest finite double.
local inf = 1 / 0
local function bytes_to_float(b)
  local e = (b[1] % 128) * 16 + math.floor(b[2] / 16)
  local m = b[2] % 16
  for i = 3, 8 do
    m = m * 256 + b[i]
  end
  local v
  if e == 0 then
    v = math.ldexp(m, -1074)
  elseif e == 2047 then
    if m == 0 then v = inf else v = 0 / 0 end
  else
    v = math.ldexp(m + 4503599627370496, e - 1075) -- 2^52
  end
  if b[1] >= 128 then
    v = -v
  end
  return v
end

local function float_to_bytes(x)
  local neg = x < 0 or (x == 0 and 1 / x < 0)
  if neg then
    x = -x
  end
  local e, m
  if x ~= x then
    e, m = 2047, 1
  elseif x == inf then
    e, m = 2047, 0
  elseif x == 0 then
    e, m = 0, 0
  else
    local f, ex = math.frexp(x) -- x = f * 2^ex, 0.5 <= f < 1
    e = ex + 1022
    if e <= 0 then
      e, m = 0, math.ldexp(x, 1074)
    else
      m = math.ldexp(f, 53) - 4503599627370496
    end
  end
  local b = {}
  for i = 8, 3, -1 do
    b[i] = m % 256
    m = math.floor(m / 256)
  end
  b[2] = (e % 16) * 16 + m
  b[1] = math.floor(e / 16)
  if neg then
    b[1] = b[1] + 128
  end
  return b
end

-- An entry's skill: 16 hex digits of its float64 bits made to sort as the
-- numbers do (see skillKey in ticket.go): a positive number's sign bit
-- set, a negative number's bits all flipped.
local skills = {}
local function skill_of(entry)
  local s = skills[entry]
  if s then
    return s
  end
  local b = {}
  local positive = tonumber(string.sub(entry, 17, 18), 16) >= 128
  for i = 1, 8 do
    local v = tonumber(string.sub(entry, 15 + 2 * i, 16 + 2 * i), 16)
    if positive then
      if i == 1 then v = v - 128 end
    else
      v = 255 - v
    end
    b[i] = v
  end
  s = bytes_to_float(b)
  skills[entry] = s
  return s
end

local function skill_hex(x)
  local p = float_to_bytes(x)
  local positive = p[1] < 128
  local out = {}
  for i = 1, 8 do
    local v = p[i]
    if positive then
      if i == 1 then v = v + 128 end
    else
      v = 255 - v
    end
    out[i] = string.format('%02x', v)
  end
  return table.concat(out)
end

local function size_of(entry)
  return tonumber(string.sub(entry, 33, 34), 16)
end

local taken = {}
local expired = {}
if max_expired > 0 then
  expired = redis.call('ZRANGEBYSCORE', age, '-inf', cutoff, 'LIMIT', 0, max_expired)
end
local matches = {}

-- try_seed chooses a match around seed (created: its enqueue time) if its
-- window holds enough waiting players.
local function try_seed(seed, created)
  local size = size_of(seed)
  if taken[seed] or size > max_size then
    return
  end
  local bucket = string.sub(seed, 1, 16)
  local skill = skill_of(seed)
  local w = window
  if now > created then
    w = window + widen * (now - created) / 1000
  end
  local up = redis.call('ZRANGEBYLEX', pool, '(' .. seed, '[' .. bucket .. skill_hex(skill + w) .. '\255', 'LIMIT', 0, scan)
  local down = redis.call('ZREVRANGEBYLEX', pool, '(' .. seed, '[' .. bucket .. skill_hex(skill - w), 'LIMIT', 0, scan)
  local chosen = {seed}
  local made = {[seed] = created}
  local total = size
  local iu, id = 1, 1
  while total < max_size and (iu <= #up or id <= #down) do
    local c
    if iu > #up then
      c = down[id]; id = id + 1
    elseif id > #down then
      c = up[iu]; iu = iu + 1
    elseif skill_of(up[iu]) - skill <= skill - skill_of(down[id]) then
      c = up[iu]; iu = iu + 1
    else
      c = down[id]; id = id + 1
    end
    if not taken[c] then
      local cs = size_of(c)
      if total + cs <= max_size then
        local cc = tonumber(redis.call('ZSCORE', age, c))
        if cc and cc > cutoff then
          chosen[#chosen + 1] = c
          made[c] = cc
          total = total + cs
        end
      end
    end
  end
  if total >= min_size then
    for _, c in ipairs(chosen) do
      taken[c] = true
    end
    -- The oldest first (the ticket id breaks ties), whichever was the
    -- seed; the others in the order they were taken.
    local o = 1
    for i = 2, #chosen do
      local a, b = chosen[i], chosen[o]
      if made[a] < made[b] or (made[a] == made[b] and a < b) then
        o = i
      end
    end
    if o > 1 then
      table.insert(chosen, 1, table.remove(chosen, o))
    end
    matches[#matches + 1] = chosen
  end
end

-- try_entry seeds entry if it is still waiting and not due to expire.
local function try_entry(entry)
  local created = tonumber(redis.call('ZSCORE', age, entry))
  if created and created > cutoff then
    try_seed(entry, created)
  end
end

if max_matches > 0 then
  -- The oldest first: the longest waits get the first choice.
  local seeds = redis.call('ZRANGEBYSCORE', age, '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, n_seeds)
  for i = 1, #seeds, 2 do
    if #matches >= max_matches then
      break
    end
    try_seed(seeds[i], tonumber(seeds[i + 1]))
  end

  -- Then each submitted ticket once, wherever it sits in the queue:
  -- a ticket that has a partner when it arrives finds it now.
  local news = {}
  if n_fresh > 0 then
    news = redis.call('LRANGE', fresh, 0, n_fresh - 1)
  end
  local used = 0
  for _, e in ipairs(news) do
    if #matches >= max_matches then
      break
    end
    try_entry(e)
    used = used + 1
  end
  if used > 0 then
    redis.call('LTRIM', fresh, used, -1)
  end

  -- Then the sweep: the next pool entries after the last one it seeded,
  -- so pairs that widening made compatible are found however deep.
  if n_sweep > 0 and #matches < max_matches then
    local last = redis.call('GET', sweep)
    local from = '-'
    if last then
      from = '(' .. last
    end
    local batch = redis.call('ZRANGEBYLEX', pool, from, '+', 'LIMIT', 0, n_sweep)
    if last and #batch < n_sweep then
      local more = redis.call('ZRANGEBYLEX', pool, '-', '[' .. last, 'LIMIT', 0, n_sweep - #batch)
      for _, e in ipairs(more) do
        batch[#batch + 1] = e
      end
    end
    local seeded
    for _, e in ipairs(batch) do
      if #matches >= max_matches then
        break
      end
      try_entry(e)
      seeded = e
    end
    if seeded then
      local ttl = redis.call('PTTL', pool)
      if ttl > 0 then
        redis.call('SET', sweep, seeded, 'PX', ttl)
      else
        redis.call('SET', sweep, seeded)
      end
    end
  end
end

local first = 0
if #matches > 0 then
  first = redis.call('INCRBY', KEYS[4], #matches) - #matches + 1
end
local oldest = redis.call('ZRANGE', age, 0, 0, 'WITHSCORES')
local oldest_ms = -1
if oldest[2] then
  oldest_ms = tonumber(oldest[2])
end
return {redis.call('ZCARD', age), oldest_ms, redis.call('ZCARD', outbox), first, matches, expired,
  redis.call('LLEN', fresh)}
