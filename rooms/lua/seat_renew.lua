-- seat_renew.lua: extend many attachments of one lobby, and the leases of
-- the seats they hold, with a few bulk commands per 1,000 attachments:
-- ZMSCORE members, leases and attachments, then ZADD XX GT attachments and
-- leases; and refresh the history TTL of each room in KEYS an attachment was
-- renewed in. An attachment that is not recorded is never created here,
-- and the seat of a user none of whose listed attachments is recorded is
-- not touched. Run with lobby_lib.lua prepended.
--
-- With a run (ARGV[8]), the triples are every attachment the run holds in
-- the lobby: those bound to the run (in runatts) are extended to the hold
-- expiry ARGV[9], the others to ARGV[2]; the run's lease here is extended
-- to ARGV[2]; and the run's bound attachments that are not among the
-- triples and were not attached or renewed within the last lease (expiry
-- at or before ARGV[9] - (ARGV[2] - ARGV[1])) are ended at once, as a dead
-- run's are (a detach that failed): a join still in flight is younger.
--
-- KEYS[1..14]   the lobby's keys, see lobby_lib.lua
-- KEYS[15..]    the histories of the rooms in ARGV[11..10+ARGV[10]], in order
-- ARGV[1..7]    see lobby_lib.lua (ARGV[2]: the new expiry; ARGV[7]: the
--               history TTL too)
-- ARGV[8]       the run renewing, or "" (then ARGV[9] is unused)
-- ARGV[9]       the hold expiry of attachments bound to the run, unix ms
-- ARGV[10]      R, the number of histories in KEYS
-- ARGV[11..10+R]  their room numbers
-- ARGV[11+R..]  room number, user, attachment id, ...: triples
--
-- Returns {lost, idle, online, rooms, stamp, changed}: lost the 1-based
-- positions of the triples whose attachment is gone (never attached,
-- detached, expired, its run's lease ran out, or its seat is gone or in
-- another room), ascending; idle 1 when the lobby has no seat left
-- (expired seats are reaped first, "left" published); then the lobby's
-- count (lobby_count in lobby_lib.lua).
local L = lobby_args()
local run, hold = ARGV[8], ARGV[9]
local nh = tonumber(ARGV[10])
local history = {}
for i = 1, nh do
  history[ARGV[10 + i]] = KEYS[14 + i]
end

local seqs, users, names, bound = {}, {}, {}, {}
for j = 11 + nh, #ARGV - 2, 3 do
  local k = #seqs + 1
  seqs[k], users[k], names[k] = ARGV[j], ARGV[j + 1], ARGV[j + 1] .. ' ' .. ARGV[j + 2]
  bound[k] = run .. ' ' .. names[k]
end

if run ~= '' then
  -- The run's bound attachments it no longer holds (a detach that failed),
  -- unless attached or renewed within the last lease (a join in flight).
  local listed = {}
  for k = 1, #bound do
    listed[bound[k]] = true
  end
  local lo, hi = run_range(run)
  local mine = redis.call('ZRANGEBYLEX', L.runatts, lo, hi)
  local extra, extraNames = {}, {}
  for _, m in ipairs(mine) do
    if not listed[m] then
      extra[#extra + 1] = m
      extraNames[#extraNames + 1] = string.match(m, '^%S+ (.*)$')
    end
  end
  if #extra > 0 then
    local young = tonumber(hold) - (L.exp - L.now)
    local exps = bulk('ZMSCORE', L.atts, {}, extraNames)
    local ghosts = {}
    for i, m in ipairs(extra) do
      if not exps[i] or tonumber(exps[i]) <= young then
        ghosts[#ghosts + 1] = m
      end
    end
    atts_expire(L, ghosts)
  end
end

-- Expired seats are not renewed: reap them first ("left" published), then
-- the expired attachments of the seats that stay.
lobby_reap(L, 1000)
atts_purge(L, 1000)

local where = bulk('ZMSCORE', L.members, {}, users)
local leases = bulk('ZMSCORE', L.leases, {}, users)
local exps = bulk('ZMSCORE', L.atts, {}, names)
local inrun = {}
if run ~= '' then
  inrun = bulk('ZMSCORE', L.runatts, {}, bound)
end

local lost, atts, seats, renewed = {}, {}, {}, {}
local any = false
for k = 1, #seqs do
  local ok = where[k] and seqstr(where[k]) == seqs[k] and leases[k] and tonumber(leases[k]) > L.now and
    exps[k] and tonumber(exps[k]) > L.now
  if ok then
    local exp = L.exp_s
    if inrun[k] then
      exp = hold
      any = true
    end
    -- GT: a user's latest attachment sets the seat's lease.
    atts[#atts + 1] = exp
    atts[#atts + 1] = names[k]
    seats[#seats + 1] = exp
    seats[#seats + 1] = users[k]
    renewed[seqs[k]] = true
  else
    lost[#lost + 1] = k
  end
end
bulk('ZADD', L.atts, {'XX', 'GT'}, atts)
bulk('ZADD', L.leases, {'XX', 'GT'}, seats)
if any then
  run_lease(L, run)
end
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
