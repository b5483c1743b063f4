-- lobby_lib.lua: local functions shared by the seat scripts of one lobby.
-- scripts.go prepends this file to each of them (Redis Lua has no modules).
--
-- Every seat script takes the same first 13 KEYS and 7 ARGV (Service.lobbyKeys
-- and Service.lobbyArgs), read by lobby_args into L:
--
-- KEYS[1]   users    HASH    user -> room number of the user's seat in the lobby
-- KEYS[2]   rooms    ZSET    every room number of the lobby
-- KEYS[3]   open     ZSET    rooms that may have a free seat, number -> number
-- KEYS[4]   opencap  STRING  capacity KEYS[3] was kept for
-- KEYS[5]   due      ZSET    room number -> lower bound of its earliest lease expiry (ms)
-- KEYS[6]   seq      STRING  last room number handed out
-- KEYS[7]   atts     HASH    user -> cjson {attachment id: [expiry ms, 1 if REST else 0]}
-- KEYS[8]   fence    STRING  the lobby lock's fence counter (lock package)
-- KEYS[9]   seats    prefix of the rooms' seat ZSETs (user -> lease expiry ms)
-- KEYS[10]  record   prefix of the room record HASHes
-- KEYS[11]  history  prefix of the room history STREAMs
-- KEYS[12]  rest     prefix of the rooms' REST SETs (users with a live REST attachment)
-- KEYS[13]  ver      STRING  stamp of the lobby's last count change (see lobby_count)
--   The prefixes carry the lobby's hash tag: a room number appended to one
--   names a key in the same Cluster slot.
-- ARGV[1]   now, unix ms
-- ARGV[2]   lease expiry of a new or renewed seat or attachment, unix ms
-- ARGV[3]   capacity (>= 1)
-- ARGV[4]   lobby name ([A-Za-z0-9_.-]: nothing to escape in JSON)
-- ARGV[5]   prefix of the rooms' pub/sub channels
-- ARGV[6]   PUBLISH or SPUBLISH
-- ARGV[7]   idle TTL, ms: every key of a lobby left without seats expires then
--
-- Room numbers are strings, as Redis returns them. A seat or attachment is
-- live while its expiry is after now; at or before now it is expired.
--
-- Invariants kept by every function here: a user has an entry in users iff
-- they hold a seat (live or not yet reaped) in that room; a user has an
-- entry in atts iff they are in users (attachments die with their seat); a
-- seat's expiry is the latest of its attachments' (a seat never outlives
-- the attachments holding it by more than a detach's rounding); a user is
-- in their room's rest SET iff one of their recorded attachments is REST.

local function lobby_args(keys, argv)
  return {
    users = keys[1], rooms = keys[2], open = keys[3], opencap = keys[4],
    due = keys[5], seq = keys[6], atts = keys[7], fence = keys[8],
    seats = keys[9], record = keys[10], history = keys[11], rest = keys[12],
    ver = keys[13],
    online0 = redis.call('HLEN', keys[1]), rooms0 = redis.call('ZCARD', keys[2]),
    now_s = argv[1], now = tonumber(argv[1]),
    exp_s = argv[2], exp = tonumber(argv[2]), cap = tonumber(argv[3]),
    lobby = argv[4], chan = argv[5], pub = argv[6], idle = tonumber(argv[7]),
    check_idle = false, woke = false,
  }
end

-- lobby_publish publishes a presence event on the room's channel, in the
-- shape of the WebSocket frame (rooms.Event).
local function lobby_publish(L, seq, user, state)
  redis.call(L.pub, L.chan .. seq,
    '{"type":"presence","room":"' .. L.lobby .. '-' .. seq ..
    '","user":"' .. user .. '","state":"' .. state .. '"}')
end

-- atts_decode decodes a user's attachments, {id = {expiry, rest}}, from raw
-- (the atts field, or false), dropping the expired ones. Returns them, the
-- number live, their latest expiry (0 for none), whether one of them is
-- REST, and whether any was expired (then dropped).
local function atts_decode(L, raw)
  local a = {}
  if raw then
    a = cjson.decode(raw)
  end
  local n, latest, rest, dropped = 0, 0, false, false
  for id, v in pairs(a) do
    if v[1] <= L.now then
      a[id] = nil
      dropped = true
    else
      n = n + 1
      if v[1] > latest then latest = v[1] end
      if v[2] == 1 then rest = true end
    end
  end
  return a, n, latest, rest, dropped
end

-- atts_get is atts_decode of user's recorded attachments.
local function atts_get(L, user)
  return atts_decode(L, redis.call('HGET', L.atts, user))
end

-- atts_put stores user's attachments a (n live, rest: any REST) and keeps
-- the room's REST set in step.
local function atts_put(L, user, seq, a, n, rest)
  if n == 0 then
    redis.call('HDEL', L.atts, user)
  else
    redis.call('HSET', L.atts, user, cjson.encode(a))
  end
  if rest then
    redis.call('SADD', L.rest .. seq, user)
  else
    redis.call('SREM', L.rest .. seq, user)
  end
end

-- atts_drop forgets every attachment of user, whose seat in room seq is gone.
local function atts_drop(L, user, seq)
  redis.call('HDEL', L.atts, user)
  redis.call('SREM', L.rest .. seq, user)
end

-- lobby_attach records attachment id (REST when rest) of L.user, whose seat
-- is in room seq, with expiry L.exp.
local function lobby_attach(L, seq, id, rest)
  local a, n, _, any_rest = atts_get(L, L.user)
  if not a[id] then
    n = n + 1
  end
  a[id] = {L.exp, rest and 1 or 0}
  atts_put(L, L.user, seq, a, n, any_rest or rest)
end

-- lobby_keys_of returns every key of the lobby that lives until it is idle:
-- the lobby's own keys and each room's record and history.
local function lobby_keys_of(L)
  local keys = {L.rooms, L.open, L.opencap, L.due, L.seq, L.fence, L.ver}
  for _, seq in ipairs(redis.call('ZRANGE', L.rooms, 0, -1)) do
    keys[#keys + 1] = L.record .. seq
    keys[#keys + 1] = L.history .. seq
  end
  return keys
end

-- lobby_retire gives every key of a lobby that has no seat left one and the
-- same expiry time (PEXPIREAT, from the server's clock), so the room counter
-- and the room records and histories disappear together: the counter never
-- goes back while a record or history exists. Returns true when the lobby
-- is idle (no seat), which the caller reports so that Go drops it from the
-- sweeper's index.
local function lobby_retire(L)
  if redis.call('EXISTS', L.users) == 1 then
    return false
  end
  local t = redis.call('TIME')
  local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + L.idle
  for _, k in ipairs(lobby_keys_of(L)) do
    redis.call('PEXPIREAT', k, at)
  end
  return true
end

-- lobby_wake removes the idle expiry of a lobby that is getting its first
-- seat (users is empty), and flags L.woke so Go registers the lobby with the
-- sweeper again. L.opencap stands for all: every seat script writes it
-- first (keeping its TTL), and lobby_retire gives them one expiry together.
local function lobby_wake(L)
  if redis.call('EXISTS', L.users) == 1 then
    return
  end
  L.woke = true
  if redis.call('PTTL', L.opencap) >= 0 then
    for _, k in ipairs(lobby_keys_of(L)) do
      redis.call('PERSIST', k)
    end
  end
end

-- lobby_count returns the lobby's seated users (HLEN users: seats not yet
-- reaped count until they are) and rooms, the stamp that orders this count
-- among the lobby's counts, and 1 when either changed during this script
-- (else 0). Go copies the count into the global lobby index, which is in
-- another Cluster slot, applying a count only when its stamp is at least the
-- one the index holds, so counts that reach the index out of order cannot
-- put an older count back. A change bumps the stamp to max(server time in
-- µs, previous + 1): strictly increasing within the lobby (its scripts run
-- one at a time on one master) and, after the key expired with an idle
-- lobby, still above every stamp handed out before. Stamp 0 means "nothing
-- to index" (no seat, no change, no stamp yet): no key is written then.
local function lobby_count(L)
  local online = redis.call('HLEN', L.users)
  local nrooms = redis.call('ZCARD', L.rooms)
  local changed = online ~= L.online0 or nrooms ~= L.rooms0
  local stamp = tonumber(redis.call('GET', L.ver) or '0')
  if changed or (stamp == 0 and online > 0) then
    local t = redis.call('TIME')
    stamp = math.max(tonumber(t[1]) * 1000000 + tonumber(t[2]), stamp + 1)
    redis.call('SET', L.ver, string.format('%.0f', stamp), 'KEEPTTL')
  end
  return online, nrooms, stamp, changed and 1 or 0
end

-- lobby_finish is the last call of every seat script: when the script
-- removed a seat or wrote to the lobby's keys (L.check_idle) and the lobby
-- has no seat left, it retires the lobby. Returns {woke, idle, online,
-- rooms, stamp, changed} for the script's reply: the flags woke and idle
-- (1/0), then lobby_count's values.
local function lobby_finish(L)
  local online, nrooms, stamp, changed = lobby_count(L)
  local idle = false
  if L.check_idle then
    idle = lobby_retire(L)
  end
  return {L.woke and 1 or 0, idle and 1 or 0, online, nrooms, stamp, changed}
end

-- lobby_free removes user's seat in room seq and their attachments, puts
-- the room back into L.open and publishes "left".
local function lobby_free(L, seq, user)
  redis.call('ZREM', L.seats .. seq, user)
  if redis.call('HGET', L.users, user) == seq then
    redis.call('HDEL', L.users, user)
    atts_drop(L, user, seq)
  end
  redis.call('ZADD', L.open, seq, seq)
  lobby_publish(L, seq, user, 'left')
  L.check_idle = true
end

-- lobby_reap removes the room's expired seats and their attachments (a
-- "left" event each), puts the room back into L.open when it lost any, and
-- sets its due score to its earliest remaining expiry. Returns the number of
-- seats removed.
local function lobby_reap(L, seq)
  local seats = L.seats .. seq
  local gone = redis.call('ZRANGEBYSCORE', seats, '-inf', L.now_s)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', seats, '-inf', L.now_s)
    for _, user in ipairs(gone) do
      if redis.call('HGET', L.users, user) == seq then
        redis.call('HDEL', L.users, user)
        atts_drop(L, user, seq)
      end
      lobby_publish(L, seq, user, 'left')
    end
    redis.call('ZADD', L.open, seq, seq)
    L.check_idle = true
  end
  local first = redis.call('ZRANGE', seats, 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', L.due, first[2], seq)
  else
    redis.call('ZREM', L.due, seq)
  end
  return #gone
end

-- lobby_reap_due reaps up to limit rooms whose due score has passed.
-- Returns the seats removed and the rooms visited.
local function lobby_reap_due(L, limit)
  local due = redis.call('ZRANGEBYSCORE', L.due, '-inf', L.now_s, 'LIMIT', 0, limit)
  local n = 0
  for _, seq in ipairs(due) do
    n = n + lobby_reap(L, seq)
  end
  return n, #due
end

-- lobby_sync_open keeps L.open a superset of the rooms with a free seat
-- under capacity L.cap: a capacity higher than the one L.open was kept for
-- may free a seat in any room, so every room goes back in. A lower one
-- needs nothing (nobody is evicted; full rooms leave L.open as joins meet them).
local function lobby_sync_open(L)
  local was = tonumber(redis.call('GET', L.opencap) or '0')
  if was ~= L.cap then
    if L.cap > was then
      redis.call('ZUNIONSTORE', L.open, 1, L.rooms)
    end
    redis.call('SET', L.opencap, L.cap, 'KEEPTTL')
    if redis.call('PTTL', L.opencap) >= 0 then
      -- ZUNIONSTORE dropped an idle lobby's expiry on L.open: lobby_finish
      -- gives it back unless a seat is taken meanwhile.
      L.check_idle = true
    end
  end
end

-- lobby_held returns the room number of L.user's live seat in the lobby,
-- extending its lease to L.exp; nil when the user holds none (an expired
-- seat of the user is reaped, a stale user entry dropped).
local function lobby_held(L)
  local seq = redis.call('HGET', L.users, L.user)
  if not seq then
    return nil
  end
  local seats = L.seats .. seq
  local exp = redis.call('ZSCORE', seats, L.user)
  if exp and tonumber(exp) > L.now then
    if L.exp > tonumber(exp) then
      redis.call('ZADD', seats, L.exp_s, L.user)
    end
    return seq
  end
  if exp then
    lobby_reap(L, seq)
  else
    redis.call('HDEL', L.users, L.user)
    atts_drop(L, L.user, seq)
    L.check_idle = true
  end
  return nil
end

-- lobby_claim seats L.user in room seq when it has fewer than L.cap seats
-- (a "joined" event). A room found full leaves L.open. Returns true when seated.
local function lobby_claim(L, seq)
  local due = redis.call('ZSCORE', L.due, seq)
  if due and tonumber(due) <= L.now then
    lobby_reap(L, seq)
    due = redis.call('ZSCORE', L.due, seq)
  end
  local seats = L.seats .. seq
  local n = redis.call('ZCARD', seats)
  if n >= L.cap then
    redis.call('ZREM', L.open, seq)
    return false
  end
  lobby_wake(L)
  redis.call('ZADD', seats, L.exp_s, L.user)
  redis.call('HSET', L.users, L.user, seq)
  if not due or tonumber(due) > L.exp then
    redis.call('ZADD', L.due, L.exp_s, seq)
  end
  if n + 1 >= L.cap then
    redis.call('ZREM', L.open, seq)
  end
  lobby_publish(L, seq, L.user, 'joined')
  return true
end

-- lobby_find seats L.user in the lowest-numbered room with a free seat.
-- Returns the room number, or nil when every room is full. Each full room
-- met leaves L.open, so the loop ends.
local function lobby_find(L)
  while true do
    local page = redis.call('ZRANGE', L.open, 0, 15)
    if #page == 0 then
      return nil
    end
    for _, seq in ipairs(page) do
      if lobby_claim(L, seq) then
        return seq
      end
    end
  end
end

-- lobby_reply is a seat script's reply: {codes, room numbers, rooms,
-- lobby_finish's values}, the first two with one entry per user ("" for no room),
-- the third {room number, {live members}, ...} for each room in the second.
local function lobby_reply(L, codes, seqs)
  local rooms, seen = {}, {}
  for _, seq in ipairs(seqs) do
    if seq ~= '' and not seen[seq] then
      seen[seq] = true
      rooms[#rooms + 1] = seq
      rooms[#rooms + 1] = redis.call('ZRANGEBYSCORE', L.seats .. seq, '(' .. L.now_s, '+inf')
    end
  end
  return {codes, seqs, rooms, lobby_finish(L)}
end
