-- lobby_lib.lua: local functions shared by the seat scripts of one lobby.
-- scripts.go prepends this file to each of them (Redis Lua has no modules).
--
-- Every function takes L, a table the calling script fills from its KEYS and
-- ARGV:
--   L.users  KEYS  HASH  user -> room number of the user's seat in the lobby
--   L.open   KEYS  ZSET  rooms that may have a free seat, number -> number
--   L.due    KEYS  ZSET  room number -> lower bound of its earliest lease expiry (ms)
--   L.seats  KEYS  prefix of the rooms' seat ZSETs (user -> lease expiry ms);
--                  it carries the lobby's hash tag, and a room number appended
--                  to it names a key in the same Cluster slot
--   L.chan   ARGV  prefix of the rooms' pub/sub channels
--   L.lobby  ARGV  lobby name ([A-Za-z0-9_.-]: nothing to escape in JSON)
--   L.now    ARGV  now, unix ms (number; L.now_s the same as a string)
--   L.user, L.exp (lease expiry ms, number; L.exp_s string), L.cap (capacity)
--                  for the functions that seat a user
-- Room numbers are strings, as Redis returns them. A seat is live while its
-- expiry is after now; a seat at or before now is expired and is reaped.

-- lobby_publish publishes a presence event on the room's channel, in the
-- shape of the WebSocket frame (rooms.Event).
local function lobby_publish(L, seq, user, state)
  redis.call('PUBLISH', L.chan .. seq,
    '{"type":"presence","room":"' .. L.lobby .. '-' .. seq ..
    '","user":"' .. user .. '","state":"' .. state .. '"}')
end

-- lobby_reap removes the room's expired seats (a "left" event each), puts
-- the room back into L.open when it lost any, and sets its due score to its
-- earliest remaining expiry. Returns the number of seats removed.
local function lobby_reap(L, seq)
  local seats = L.seats .. seq
  local gone = redis.call('ZRANGEBYSCORE', seats, '-inf', L.now_s)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', seats, '-inf', L.now_s)
    for _, user in ipairs(gone) do
      if redis.call('HGET', L.users, user) == seq then
        redis.call('HDEL', L.users, user)
      end
      lobby_publish(L, seq, user, 'left')
    end
    redis.call('ZADD', L.open, seq, seq)
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
local function lobby_sync_open(L, rooms_key, opencap_key)
  local was = tonumber(redis.call('GET', opencap_key) or '0')
  if was ~= L.cap then
    if L.cap > was then
      redis.call('ZUNIONSTORE', L.open, 1, rooms_key)
    end
    redis.call('SET', opencap_key, L.cap)
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

-- lobby_reply is a seat script's reply: {codes, room numbers, rooms}, the
-- first two with one entry per user ("" for no room), the third
-- {room number, {live members}, ...} for each room in the second.
local function lobby_reply(L, codes, seqs)
  local rooms, seen = {}, {}
  for _, seq in ipairs(seqs) do
    if seq ~= '' and not seen[seq] then
      seen[seq] = true
      rooms[#rooms + 1] = seq
      rooms[#rooms + 1] = redis.call('ZRANGEBYSCORE', L.seats .. seq, '(' .. L.now_s, '+inf')
    end
  end
  return {codes, seqs, rooms}
end

-- lobby_args fills L from the argument layout shared by seat_claim.lua and
-- room_create.lua; L.user is set per user.
local function lobby_args(users, open, due, seats, argv)
  return {
    users = users, open = open, due = due, seats = seats,
    now_s = argv[1], now = tonumber(argv[1]),
    exp_s = argv[2], exp = tonumber(argv[2]), cap = tonumber(argv[3]),
    lobby = argv[4], chan = argv[5],
  }
end
