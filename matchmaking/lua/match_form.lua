-- match_form.lua: form the chosen matches and expire the chosen tickets,
-- only while the caller's fence is the queue lock's newest. Run with
-- lock.FenceCheckLua prepended.
--
-- KEYS[1]  fence   STRING the queue lock's fence (package lock)
-- KEYS[2]  pool    ZSET   entry -> 0
-- KEYS[3]  age     ZSET   entry -> created ms
-- KEYS[4]  users   HASH   canonical user -> open ticket id
-- KEYS[5]  outbox  ZSET   "m:SEQ" / "x:TICKET" -> ms, to announce
-- KEYS[6..] for each match: its record key, then its tickets' keys; then
--          the key of each ticket to expire
-- ARGV[1]  fence     ARGV[2]  now, Unix ms
-- ARGV[3]  status TTL in ms (ended tickets and match records)
-- ARGV[4]  keep: TTL in ms of the queue's keys
-- ARGV[5]  min players  ARGV[6]  max players
-- ARGV[7]  cutoff, Unix ms: only a ticket created at or before it expires
-- ARGV[8]  number of matches; then for each: its number, its ticket count
--          n, and n entries (the oldest first)
-- then     number of expiries, and their entries
--
-- A match is formed only if every one of its tickets is still waiting with
-- the same entry, their attributes are equal and their players within min
-- and max: then the tickets leave the pool, the age index and the user
-- map, become "matched" (with the match number), the record is written
-- and "m:SEQ" joins the outbox, all together. Otherwise nothing of it is
-- written (a ticket was cancelled, expired or matched by a newer holder).
--
-- Returns -1, writing nothing, when the fence is stale; else {{per match:
-- {1, attributes, players JSON} when formed, {0} when not}, {per expiry:
-- the ticket's fields (HGETALL) when expired, {} when not}}.
if not fence_is_current(KEYS[1], ARGV[1]) then
  return -1
end
local pool, age, users, outbox = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local now, status_ttl, keep = ARGV[2], ARGV[3], ARGV[4]
local min_size, max_size = tonumber(ARGV[5]), tonumber(ARGV[6])
local cutoff = tonumber(ARGV[7])
local a, k = 8, 6
local changed = false

-- close takes a waiting ticket out of the queue and gives it its end.
local function close(tkey, id, t, ...)
  redis.call('ZREM', pool, t.entry)
  redis.call('ZREM', age, t.entry)
  local members = {t.user}
  for m in string.gmatch(t.party or '', '%S+') do
    members[#members + 1] = m
  end
  -- The user map is keyed by canonical name (string.lower is
  -- names.Canonical on the names' alphabet); tickets written before it
  -- was are keyed as typed.
  for _, m in ipairs(members) do
    for _, u in ipairs({string.lower(m), m}) do
      if redis.call('HGET', users, u) == id then
        redis.call('HDEL', users, u)
      end
    end
  end
  redis.call('HSET', tkey, 'ended', now, ...)
  redis.call('PEXPIRE', tkey, status_ttl)
  changed = true
end

local function load(tkey)
  local v = redis.call('HMGET', tkey, 'state', 'entry', 'attrs', 'user', 'party', 'skill', 'created')
  return {state = v[1], entry = v[2], attrs = v[3], user = v[4], party = v[5], skill = v[6], created = v[7]}
end

local formed = {}
local n_matches = tonumber(ARGV[a]); a = a + 1
for m = 1, n_matches do
  local seq, n = ARGV[a], tonumber(ARGV[a + 1])
  local mkey = KEYS[k]
  a, k = a + 2, k + 1
  local ok, total, attrs = true, 0, nil
  local tickets = {}
  for i = 1, n do
    local entry = ARGV[a + i - 1]
    local t = load(KEYS[k + i - 1])
    if t.state ~= 'waiting' or t.entry ~= entry or (attrs and attrs ~= t.attrs) then
      ok = false
      break
    end
    attrs = t.attrs
    total = total + tonumber(string.sub(entry, 33, 34), 16)
    tickets[i] = t
  end
  if ok and (total < min_size or total > max_size) then
    ok = false
  end
  if ok then
    local players = {}
    for i = 1, n do
      local t = tickets[i]
      local id = string.sub(t.entry, 35)
      close(KEYS[k + i - 1], id, t, 'state', 'matched', 'match', seq)
      players[i] = {id = id, user = t.user, party = t.party or '', skill = t.skill, created = t.created}
    end
    local pj = cjson.encode(players)
    redis.call('HSET', mkey, 'seq', seq, 'created', now, 'fence', ARGV[1], 'attrs', attrs, 'players', pj)
    redis.call('PEXPIRE', mkey, status_ttl)
    redis.call('ZADD', outbox, now, 'm:' .. seq)
    formed[m] = {1, attrs, pj}
  else
    formed[m] = {0}
  end
  a, k = a + n, k + n
end

local expired = {}
local n_expired = tonumber(ARGV[a]); a = a + 1
for i = 1, n_expired do
  local entry, tkey = ARGV[a], KEYS[k]
  a, k = a + 1, k + 1
  local t = load(tkey)
  if t.state == 'waiting' and t.entry == entry and tonumber(t.created) <= cutoff then
    local id = string.sub(entry, 35)
    close(tkey, id, t, 'state', 'expired')
    redis.call('ZADD', outbox, now, 'x:' .. id)
    expired[i] = redis.call('HGETALL', tkey)
  else
    expired[i] = {}
  end
end

if changed then
  for i = 2, 5 do
    redis.call('PEXPIRE', KEYS[i], keep)
  end
end
return {formed, expired}
