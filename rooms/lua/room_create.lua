-- room_create.lua: under the lobby's lock, seat users, creating rooms when
-- every room is full, and record each caller's attachment; refused unless
-- the caller's lock fence is current. Run with lock.FenceCheckLua and
-- lobby_lib.lua prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua (KEYS[11] is the fence)
-- ARGV[1..7]   as seat_claim.lua
-- ARGV[8]  the caller's lock fence (decimal)
-- ARGV[9..]  user, attachment id, kind ("rest", "ws" or "run:<run>:<hold expiry>"), ...: triples,
--            seated in this order
--
-- Returns {codes, room numbers, {room number, {live members}, ...},
-- {woke, idle, ...}} as seat_claim.lua, every user seated: code 3 for the
-- user a room was created for (the others in it get 1); {{-3}, {""}, {},
-- {0, 0}} when a newer fence was issued, writing nothing (no count: Go
-- indexes nothing). A new room's record is {"id", "lobby", "seq",
-- "created" (ARGV[1]), "fence" (ARGV[8])}.
if not fence_is_current(KEYS[11], ARGV[8]) then
  return {{-3}, {''}, {}, {0, 0}}
end
local L = lobby_args()
lobby_sync_open(L)
lobby_reap(L, 256)
local codes, seqs = {}, {}
for i = 9, #ARGV - 2, 3 do
  L.user = ARGV[i]
  local held = lobby_held(L)
  if held then
    codes[#codes + 1], seqs[#seqs + 1] = 2, held
  else
    local seq = lobby_find(L)
    local code = 1
    if not seq then
      seq = tostring(redis.call('INCR', L.seq))
      redis.call('HSET', L.records, seq, '{"id":"' .. L.lobby .. '-' .. seq .. '","lobby":"' .. L.lobby ..
        '","seq":' .. seq .. ',"created":' .. L.now_s .. ',"fence":' .. ARGV[8] .. '}')
      redis.call('ZADD', L.rooms, seq, seq)
      redis.call('ZADD', L.open, seq, seq)
      lobby_claim(L, seq)
      code = 3
    end
    codes[#codes + 1], seqs[#seqs + 1] = code, seq
  end
  lobby_attach(L, seqs[#seqs], ARGV[i + 1], ARGV[i + 2])
end
return lobby_reply(L, codes, seqs)
