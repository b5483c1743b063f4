-- seat_renew.lua: extend many attachments of one lobby, and the leases of
-- the seats they hold, with a few bulk commands per 1,000 attachments:
-- ZMSCORE members, leases and attachments, then ZADD XX GT attachments and
-- leases; and refresh the history TTL of each room in KEYS an attachment was
-- renewed in. An attachment that is not recorded is never created here,
-- and the seat of a user none of whose listed attachments is recorded is
-- not touched. Run with lobby_lib.lua prepended.
--
-- KEYS[1..12]   the lobby's keys, see lobby_lib.lua
-- KEYS[13..]    the histories of the rooms in ARGV[9..8+ARGV[8]], in order
-- ARGV[1..7]    see lobby_lib.lua (ARGV[2]: the new expiry; ARGV[7]: the
--               history TTL too)
-- ARGV[8]       R, the number of histories in KEYS
-- ARGV[9..8+R]  their room numbers
-- ARGV[9+R..]   room number, user, attachment id, ...: triples
--
-- Returns {lost, idle, online, rooms, stamp, changed}: lost the 1-based
-- positions of the triples whose attachment is gone (never attached,
-- detached, expired, or its seat is gone or in another room), ascending;
-- idle 1 when the lobby has no seat left (expired seats are reaped first,
-- "left" published); then the lobby's count (lobby_count in lobby_lib.lua).
local L = lobby_args()
local nh = tonumber(ARGV[8])
local history = {}
for i = 1, nh do
  history[ARGV[8 + i]] = KEYS[12 + i]
end

-- Expired seats are not renewed: reap them first ("left" published), then
-- the expired attachments of the seats that stay.
lobby_reap(L, 1000)
atts_purge(L, 1000)

local seqs, users, names = {}, {}, {}
for j = 9 + nh, #ARGV - 2, 3 do
  local k = #seqs + 1
  seqs[k], users[k], names[k] = ARGV[j], ARGV[j + 1], ARGV[j + 1] .. ' ' .. ARGV[j + 2]
end
local where = bulk('ZMSCORE', L.members, {}, users)
local leases = bulk('ZMSCORE', L.leases, {}, users)
local exps = bulk('ZMSCORE', L.atts, {}, names)

local lost, atts, seats, seen, renewed = {}, {}, {}, {}, {}
for k = 1, #seqs do
  local ok = where[k] and seqstr(where[k]) == seqs[k] and leases[k] and tonumber(leases[k]) > L.now and
    exps[k] and tonumber(exps[k]) > L.now
  if ok then
    atts[#atts + 1] = L.exp_s
    atts[#atts + 1] = names[k]
    if not seen[users[k]] then
      seen[users[k]] = true
      seats[#seats + 1] = L.exp_s
      seats[#seats + 1] = users[k]
    end
    renewed[seqs[k]] = true
  else
    lost[#lost + 1] = k
  end
end
bulk('ZADD', L.atts, {'XX', 'GT'}, atts)
bulk('ZADD', L.leases, {'XX', 'GT'}, seats)
-- A room's history lives while someone is seated in it (or talks there):
-- refreshed only for a room a live attachment was renewed in, so never
-- after the lobby's last seat went.
for seq in pairs(renewed) do
  if history[seq] then
    redis.call('PEXPIRE', history[seq], L.idle)
  end
end
local f = lobby_finish(L)
return {lost, f[2], f[3], f[4], f[5], f[6]}
