-- room_create.lua: under the lobby's lock, seat users, creating rooms when
-- every room is full; refused unless the caller's lock fence is current.
-- Run with lock.FenceCheckLua and lobby_lib.lua prepended.
--
-- KEYS[1]  users     HASH    user -> room number
-- KEYS[2]  rooms     ZSET    every room number of the lobby
-- KEYS[3]  open      ZSET    rooms that may have a free seat
-- KEYS[4]  opencap   STRING  capacity KEYS[3] was kept for
-- KEYS[5]  due       ZSET    room number -> lower bound of earliest lease expiry
-- KEYS[6]  seats     prefix of the rooms' seat ZSETs (lobby hash tag)
-- KEYS[7]  fence     STRING  the lobby lock's fence counter (lock package)
-- KEYS[8]  seq       STRING  last room number handed out
-- KEYS[9]  record    prefix of the room record HASHes (lobby hash tag)
-- ARGV[1..5]  as seat_claim.lua: now, lease expiry, capacity, lobby,
--             channel prefix
-- ARGV[6]  the caller's lock fence (decimal)
-- ARGV[7..]  users, seated in this order
--
-- Returns {codes, room numbers, {room number, {live members}, ...}} as
-- seat_claim.lua, every user seated: code 3 for the user a room was
-- created for (the others in it get 1); {{-3}, {""}, {}} when a newer fence
-- was issued, writing nothing.
if not fence_is_current(KEYS[7], ARGV[6]) then
  return {{-3}, {''}, {}}
end
local L = lobby_args(KEYS[1], KEYS[3], KEYS[5], KEYS[6], ARGV)
lobby_sync_open(L, KEYS[2], KEYS[4])
lobby_reap_due(L, 64)
local codes, seqs = {}, {}
for i = 7, #ARGV do
  L.user = ARGV[i]
  local held = lobby_held(L)
  if held then
    codes[#codes + 1], seqs[#seqs + 1] = 2, held
  else
    local seq = lobby_find(L)
    local code = 1
    if not seq then
      seq = tostring(redis.call('INCR', KEYS[8]))
      redis.call('HSET', KEYS[9] .. seq, 'id', L.lobby .. '-' .. seq, 'lobby', L.lobby,
        'seq', seq, 'created', L.now_s, 'fence', ARGV[6])
      redis.call('ZADD', KEYS[2], seq, seq)
      redis.call('ZADD', KEYS[3], seq, seq)
      lobby_claim(L, seq)
      code = 3
    end
    codes[#codes + 1], seqs[#seqs + 1] = code, seq
  end
end
return lobby_reply(L, codes, seqs)
