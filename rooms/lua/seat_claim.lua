-- seat_claim.lua: seat users in a lobby, each in the lowest-numbered room
-- with a free seat; or one user in one given room. Run with lobby_lib.lua
-- prepended.
--
-- KEYS[1]  users     HASH    user -> room number
-- KEYS[2]  rooms     ZSET    every room number of the lobby
-- KEYS[3]  open      ZSET    rooms that may have a free seat
-- KEYS[4]  opencap   STRING  capacity KEYS[3] was kept for
-- KEYS[5]  due       ZSET    room number -> lower bound of earliest lease expiry
-- KEYS[6]  seats     prefix of the rooms' seat ZSETs (lobby hash tag)
-- ARGV[1]  now, unix ms
-- ARGV[2]  lease expiry of a new or renewed seat, unix ms
-- ARGV[3]  capacity (>= 1)
-- ARGV[4]  lobby name
-- ARGV[5]  channel prefix
-- ARGV[6]  room number to seat the one user in, or "" for the lowest with a
--          free seat
-- ARGV[7..]  users, seated in this order
--
-- Returns {codes, room numbers, {room number, {live members}, ...}}, one
-- code and room number ("" for none) per user:
--   2  the user already held a live seat there (lease extended; no event)
--   1  the user is seated there now ("joined" published)
--   0  every room is full (ARGV[6] ""): create one under the lock;
--      or the given room is full
--  -1  the given room does not exist
--  -2  the user holds a live seat in another room of the lobby (ARGV[6] set)
local L = lobby_args(KEYS[1], KEYS[3], KEYS[5], KEYS[6], ARGV)
lobby_sync_open(L, KEYS[2], KEYS[4])
local codes, seqs = {}, {}
local target = ARGV[6]
if target ~= '' then
  L.user = ARGV[7]
  if not redis.call('ZSCORE', KEYS[2], target) then
    return {{-1}, {''}, {}}
  end
  local held = lobby_held(L)
  if held == target then
    codes[1], seqs[1] = 2, held
  elseif held then
    codes[1], seqs[1] = -2, held
  elseif lobby_claim(L, target) then
    codes[1], seqs[1] = 1, target
  else
    codes[1], seqs[1] = 0, target
  end
  return lobby_reply(L, codes, seqs)
end
local full, reaped = false, false
for i = 7, #ARGV do
  L.user = ARGV[i]
  local held = lobby_held(L)
  local seq = nil
  if not held and not full then
    if not reaped then
      lobby_reap_due(L, 64)
      reaped = true
    end
    seq = lobby_find(L)
    full = (seq == nil)
  end
  if held then
    codes[#codes + 1], seqs[#seqs + 1] = 2, held
  elseif seq then
    codes[#codes + 1], seqs[#seqs + 1] = 1, seq
  else
    codes[#codes + 1], seqs[#seqs + 1] = 0, ''
  end
end
return lobby_reply(L, codes, seqs)
