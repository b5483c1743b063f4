-- seat_claim.lua: seat users in a lobby, each in the lowest-numbered room
-- with a free seat; or one user in one given room; and record each caller's
-- attachment to the seat, in the same script. Run with lobby_lib.lua
-- prepended.
--
-- KEYS[1..14]  the lobby's keys, see lobby_lib.lua
-- ARGV[1..7]   now, lease expiry, capacity, lobby, channel prefix,
--              publish command, idle TTL: see lobby_lib.lua
-- ARGV[8]  room number to seat the one user in, or "" for the lowest with a
--          free seat
-- ARGV[9..]  user, attachment id, kind ("rest", "ws" or "run:<run>:<hold expiry>"), ...: triples,
--            seated in this order
--
-- Returns {codes, room numbers, {room number, {live members}, ...},
-- {woke, idle, online, rooms, stamp, changed}}, one code and room number
-- ("" for none) per user:
--   2  the user already held a live seat there (lease extended; no event)
--   1  the user is seated there now ("joined" published)
--   0  every room is full (ARGV[8] ""): create one under the lock;
--      or the given room is full
--  -1  the given room does not exist
--  -2  the user holds a live seat in another room of the lobby (ARGV[8] set)
--  -4  the lobby is private (room_private.lua): a lobby join, or a claim
--      by a user the room was not made for (nothing is written)
-- The attachment is recorded (expiry ARGV[2]) for codes 2 and 1 only. woke
-- is 1 when the lobby had no seat before (register it with the sweeper);
-- idle is 1 when it has none after (unregister it); the rest is
-- lobby_finish's count (lobby_lib.lua).
local L = lobby_args()
local codes, seqs = {}, {}
local target = ARGV[8]
local private = redis.call('HGET', L.records, 'private')
if private then
  -- A private room (room_private.lua): no lobby join, and its room only
  -- for the users it was made for.
  local allowed = target ~= ''
  if allowed then
    allowed = false
    local me = string.lower(ARGV[9]) -- names compare canonically (package names)
    for u in string.gmatch(private, '%S+') do
      if string.lower(u) == me then
        allowed = true
      end
    end
  end
  if not allowed then
    for i = 9, #ARGV - 2, 3 do
      codes[#codes + 1], seqs[#seqs + 1] = -4, ''
    end
    return {codes, seqs, {}, lobby_finish(L)}
  end
  local n = 0
  for _ in string.gmatch(private, '%S+') do
    n = n + 1
  end
  L.cap = math.max(L.cap, n)
end
lobby_sync_open(L)
if target ~= '' then
  L.user = ARGV[9]
  if not redis.call('ZSCORE', L.rooms, target) then
    return {{-1}, {''}, {}, lobby_finish(L)}
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
  if codes[1] > 0 then
    lobby_attach(L, target, ARGV[10], ARGV[11])
  end
  return lobby_reply(L, codes, seqs)
end
local full, reaped = false, false
for i = 9, #ARGV - 2, 3 do
  L.user = ARGV[i]
  local held = lobby_held(L)
  local seq = nil
  if not held and not full then
    if not reaped then
      lobby_reap(L, 256)
      reaped = true
    end
    seq = lobby_find(L)
    full = (seq == nil)
  end
  if held then
    codes[#codes + 1], seqs[#seqs + 1] = 2, held
    lobby_attach(L, held, ARGV[i + 1], ARGV[i + 2])
  elseif seq then
    codes[#codes + 1], seqs[#seqs + 1] = 1, seq
    lobby_attach(L, seq, ARGV[i + 1], ARGV[i + 2])
  else
    codes[#codes + 1], seqs[#seqs + 1] = 0, ''
  end
end
return lobby_reply(L, codes, seqs)
