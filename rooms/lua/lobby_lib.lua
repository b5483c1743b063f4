-- lobby_lib.lua: local functions shared by the seat scripts of one lobby.
-- scripts.go prepends this file to each of them (Redis Lua has no modules).
--
-- Every seat script takes the same first 14 KEYS and 7 ARGV (Service.lobbyKeys
-- and Service.lobbyArgs), read by lobby_args into L. They are lobby-wide:
-- a seat script chooses a room at run time and never names a key for it.
--
-- KEYS[1]   members  ZSET    user -> room number of the user's seat
-- KEYS[2]   leases   ZSET    user -> the seat's lease expiry (ms)
-- KEYS[3]   atts     ZSET    "<user> <attachment id>" -> the attachment's expiry (ms)
-- KEYS[4]   attids   HASH    user -> the user's attachment ids, space-separated,
--                            a REST one marked with a leading '+', one bound
--                            to a run followed by '@' and the run
-- KEYS[5]   rest     ZSET    user -> room number, for users with a REST attachment
-- KEYS[6]   rooms    ZSET    every room number of the lobby
-- KEYS[7]   open     ZSET    rooms that may have a free seat, number -> number
-- KEYS[8]   opencap  STRING  capacity KEYS[7] was kept for
-- KEYS[9]   seq      STRING  last room number handed out
-- KEYS[10]  records  HASH    room number -> the room's record (JSON)
-- KEYS[11]  fence    STRING  the lobby lock's fence counter (lock package)
-- KEYS[12]  ver      STRING  stamp of the lobby's last count change (see lobby_count)
-- KEYS[13]  runs     ZSET    run -> the lease expiry (ms) of the run's attachments here
-- KEYS[14]  runatts  ZSET    "<run> <user> <attachment id>", all scored 0 (ranged by
--                            lex): the attachments bound to each run
-- ARGV[1]   now, unix ms
-- ARGV[2]   lease expiry of a new or renewed seat or attachment, unix ms
-- ARGV[3]   capacity (>= 1)
-- ARGV[4]   lobby name ([A-Za-z0-9_.-]: nothing to escape in JSON)
-- ARGV[5]   prefix of the rooms' pub/sub channels
-- ARGV[6]   PUBLISH or SPUBLISH
-- ARGV[7]   idle TTL, ms: the lobby's keys expire then once it has no seat
--
-- Room numbers are strings, as Redis returns members ("3"); scores read
-- back go through seqstr. A seat or attachment is live while its expiry is
-- after now; at or before now it is expired.
--
-- Invariants kept by every function here: members and leases hold the same
-- users (a seat, live or not yet reaped); a user has attachments (attids,
-- atts) only while in members, and every id in attids has its entry in
-- atts (an expired one until a purge, a detach or the seat's reap drops
-- it); a seat's lease is the latest of its attachments' expiries; a user is
-- in rest, with their room number, iff one of the ids in attids is REST;
-- an id of attids bound to a run (id@run) has its entry in runatts, and
-- runatts holds nothing else.
--
-- An attachment bound to a run (a WebSocket of a node's run: kind
-- "run:<run>:<hold expiry>") lives while its run's lease in runs does: its
-- own expiry in atts, and its seat's lease, are the hold expiry, far ahead
-- and renewed rarely, while the node renews the run's lease here once per
-- tick (run_keep.lua: O(1) per lobby, whatever its attachments). When a
-- run's lease is over, runs_reap (run by lobby_args, so first in every seat
-- script) expires the run's attachments at once and sets the lease of each
-- seat none of whose other attachments lives to now: lobby_reap then reaps
-- it like any expired seat ("left" published).

-- uncounted: the script never calls lobby_finish (run_keep.lua, every
-- run's keep in every lobby each tick), so the counts lobby_count compares
-- with are not read (two ZCARDs fewer); lobby_count would take the lobby
-- as changed.
local function lobby_args0(uncounted)
  local L = {
    members = KEYS[1], leases = KEYS[2], atts = KEYS[3], attids = KEYS[4], rest = KEYS[5],
    rooms = KEYS[6], open = KEYS[7], opencap = KEYS[8], seq = KEYS[9], records = KEYS[10],
    fence = KEYS[11], ver = KEYS[12], runs = KEYS[13], runatts = KEYS[14],
    now_s = ARGV[1], now = tonumber(ARGV[1]),
    exp_s = ARGV[2], exp = tonumber(ARGV[2]), cap = tonumber(ARGV[3]),
    lobby = ARGV[4], chan = ARGV[5], pub = ARGV[6], idle = tonumber(ARGV[7]),
    check_idle = false, woke = false,
  }
  if not uncounted then
    L.online0, L.rooms0 = redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[6])
  end
  return L
end

-- seqstr is a room number read back as a score ("3", 3 or "3.0") as the
-- string the rooms' members are.
local function seqstr(score)
  return string.format('%d', tonumber(score))
end

-- bulk runs cmd on key with the arguments head..., items[i..i+999], for
-- every 1,000 items (Lua's unpack has a stack limit; 1,000 keeps pairs
-- whole), and returns the replies' elements concatenated.
local function bulk(cmd, key, head, items)
  local out = {}
  for i = 1, #items, 1000 do
    local args = {}
    for _, h in ipairs(head) do
      args[#args + 1] = h
    end
    for j = i, math.min(i + 999, #items) do
      args[#args + 1] = items[j]
    end
    local r = redis.call(cmd, key, unpack(args))
    if type(r) == 'table' then
      for j = 1, #r do
        out[#out + 1] = r[j]
      end
    end
  end
  return out
end

-- lobby_publish publishes a presence event on the room's channel, in the
-- shape of the WebSocket frame (rooms.Event). A channel is not a key: it
-- may be named here.
local function lobby_publish(L, seq, user, state)
  local ch = L.chan .. seq
  local msg = '{"type":"presence","room":"' .. L.lobby .. '-' .. seq ..
    '","user":"' .. user .. '","state":"' .. state .. '"}'
  if L.pub == 'SPUBLISH' then
    redis.call('SPUBLISH', ch, msg)
  else
    redis.call('PUBLISH', ch, msg)
  end
end

-- atts_ids returns user's recorded attachments as {{id, rest, nil, run},
-- ...} (run nil unless the attachment is bound to one).
local function atts_ids(L, user)
  local out = {}
  local raw = redis.call('HGET', L.attids, user)
  if raw then
    for tok in string.gmatch(raw, '%S+') do
      if string.sub(tok, 1, 1) == '+' then
        out[#out + 1] = {string.sub(tok, 2), true}
      else
        local id, run = string.match(tok, '^([^@]+)@(.+)$')
        if id then
          out[#out + 1] = {id, false, nil, run}
        else
          out[#out + 1] = {tok, false}
        end
      end
    end
  end
  return out
end

-- run_name is the runatts member of attachment a ({id, rest, exp, run}) of
-- user, or nil when a is bound to no run.
local function run_name(user, a)
  if a[4] then
    return a[4] .. ' ' .. user .. ' ' .. a[1]
  end
  return nil
end

-- runatts_forget drops the runatts entries of user's attachments in list.
local function runatts_forget(L, user, list)
  local names = {}
  for _, a in ipairs(list) do
    local n = run_name(user, a)
    if n then
      names[#names + 1] = n
    end
  end
  if #names > 0 then
    bulk('ZREM', L.runatts, {}, names)
  end
end

-- run_range is the ZRANGEBYLEX bounds of run's entries in runatts.
local function run_range(run)
  return '[' .. run .. ' ', '[' .. run .. ' \255'
end

-- atts_load returns user's live attachments, {{id, rest, expiry}, ...},
-- and whether any recorded one was expired: those are dropped from atts
-- here, and from attids when the caller stores the list (atts_store).
local function atts_load(L, user)
  local list = atts_ids(L, user)
  if #list == 0 then
    return list, false
  end
  local names = {}
  for i, a in ipairs(list) do
    names[i] = user .. ' ' .. a[1]
  end
  local exps = bulk('ZMSCORE', L.atts, {}, names)
  local live, dead, gone = {}, {}, {}
  for i, a in ipairs(list) do
    local e = exps[i] and tonumber(exps[i])
    if e and e > L.now then
      a[3] = e
      live[#live + 1] = a
    else
      dead[#dead + 1] = names[i]
      gone[#gone + 1] = a
    end
  end
  if #dead > 0 then
    bulk('ZREM', L.atts, {}, dead)
    runatts_forget(L, user, gone)
  end
  return live, #dead > 0
end

-- atts_store writes user's attachment ids (list, as atts_ids returns it)
-- and keeps rest in step; user's seat is in room seq.
local function atts_store(L, user, seq, list)
  if #list == 0 then
    redis.call('HDEL', L.attids, user)
    redis.call('ZREM', L.rest, user)
    return
  end
  local toks, rest = {}, false
  for i, a in ipairs(list) do
    if a[2] then
      toks[i] = '+' .. a[1]
      rest = true
    elseif a[4] then
      toks[i] = a[1] .. '@' .. a[4]
    else
      toks[i] = a[1]
    end
  end
  redis.call('HSET', L.attids, user, table.concat(toks, ' '))
  if rest then
    redis.call('ZADD', L.rest, seq, user)
  else
    redis.call('ZREM', L.rest, user)
  end
end

-- atts_drop forgets every attachment of user, whose seat is gone.
local function atts_drop(L, user)
  local list = atts_ids(L, user)
  if #list > 0 then
    local names = {}
    for i, a in ipairs(list) do
      names[i] = user .. ' ' .. a[1]
    end
    bulk('ZREM', L.atts, {}, names)
    runatts_forget(L, user, list)
    redis.call('HDEL', L.attids, user)
  end
  redis.call('ZREM', L.rest, user)
end

-- lobby_attach records attachment id of L.user, whose seat is in room
-- seq, with expiry L.exp; kind is "ws", "rest", or "run:<run>:<hold
-- expiry>" for one bound to a run (expiry the hold's, the seat's lease at
-- least that, and the run's lease here at least L.exp). The user's expired
-- attachments go.
-- run_lease extends run's lease in the lobby to L.exp (ZADD GT) and keeps
-- the runs key at most a lobby idle time (at least a lease) after the
-- latest lease written: a lobby its nodes left, or a node that stopped,
-- leaves no runs key without a TTL. The dead runs' attachments are ended
-- long before (runs_reap at the lobby's next seat script or sweep, due at
-- the run's expiry); were the key gone first, their holds would end them.
local function run_lease(L, run)
  redis.call('ZADD', L.runs, 'GT', L.exp_s, run)
  -- relative to the caller's clock, as the lease is (a PEXPIREAT would
  -- mix it with the server's)
  local lease = math.max(1, L.exp - L.now)
  redis.call('PEXPIRE', L.runs, lease + math.max(L.idle, lease))
end

local function lobby_attach(L, seq, id, kind)
  local rest = kind == 'rest'
  local run, hold = string.match(kind, '^run:([^:]+):(%d+)$')
  local list, dropped = atts_load(L, L.user)
  local found, changed = false, false
  for _, a in ipairs(list) do
    if a[1] == id then
      found = true
      if a[2] ~= rest then
        a[2] = rest
        changed = true
      end
      if a[4] ~= run then
        runatts_forget(L, L.user, {a})
        a[4] = run
        changed = true
      end
    end
  end
  if not found then
    list[#list + 1] = {id, rest, nil, run}
    changed = true
  end
  if dropped or changed then
    atts_store(L, L.user, seq, list)
  end
  if run then
    redis.call('ZADD', L.atts, hold, L.user .. ' ' .. id)
    redis.call('ZADD', L.leases, 'GT', hold, L.user)
    redis.call('ZADD', L.runatts, 0, run .. ' ' .. L.user .. ' ' .. id)
    run_lease(L, run)
  else
    redis.call('ZADD', L.atts, L.exp_s, L.user .. ' ' .. id)
  end
end

-- atts_purge drops up to limit expired attachments of the lobby whose seats
-- live on (held by another attachment), so that a REST attachment whose
-- session died stops marking its room as having REST members.
local function atts_purge(L, limit)
  local dead = redis.call('ZRANGEBYSCORE', L.atts, '-inf', L.now_s, 'LIMIT', 0, limit)
  if #dead == 0 then
    return
  end
  bulk('ZREM', L.atts, {}, dead)
  local gone, users = {}, {}
  for _, name in ipairs(dead) do
    local user, id = string.match(name, '^(%S+) (%S+)$')
    if user then
      if not gone[user] then
        gone[user] = {}
        users[#users + 1] = user
      end
      gone[user][id] = true
    end
  end
  for _, user in ipairs(users) do
    local keep, drop = {}, {}
    for _, a in ipairs(atts_ids(L, user)) do
      if not gone[user][a[1]] then
        keep[#keep + 1] = a
      else
        drop[#drop + 1] = a
      end
    end
    runatts_forget(L, user, drop)
    local seq = redis.call('ZSCORE', L.members, user)
    if seq then
      atts_store(L, user, seqstr(seq), keep)
    else
      atts_store(L, user, '0', {})
    end
  end
end

-- atts_expire ends the attachments named in runatts members names ("<run>
-- <user> <id>") now, drops them from runatts, and sets the lease of each of
-- their seats to its latest live attachment's expiry, or to now when none
-- lives (lobby_reap then reaps it, "left" published).
local function atts_expire(L, names)
  if #names == 0 then
    return
  end
  local users, seen = {}, {}
  for _, m in ipairs(names) do
    local user, id = string.match(m, '^%S+ (%S+) (%S+)$')
    if user then
      redis.call('ZADD', L.atts, 'XX', L.now_s, user .. ' ' .. id)
      if not seen[user] then
        seen[user] = true
        users[#users + 1] = user
      end
    end
  end
  bulk('ZREM', L.runatts, {}, names)
  for _, user in ipairs(users) do
    local seq = redis.call('ZSCORE', L.members, user)
    if seq then
      local live = atts_load(L, user)
      atts_store(L, user, seqstr(seq), live)
      local latest = L.now
      for _, a in ipairs(live) do
        if a[3] > latest then latest = a[3] end
      end
      redis.call('ZADD', L.leases, 'XX', string.format('%d', latest), user)
    end
  end
end

-- runs_reap ends the attachments of the runs whose lease here is over
-- (their node died, was paused past the lease, or stopped renewing), at
-- once, whatever their own expiry: see atts_expire.
local function runs_reap(L)
  local dead = redis.call('ZRANGEBYSCORE', L.runs, '-inf', L.now_s)
  for _, run in ipairs(dead) do
    local lo, hi = run_range(run)
    atts_expire(L, redis.call('ZRANGEBYLEX', L.runatts, lo, hi))
    redis.call('ZREM', L.runs, run)
  end
end

-- lobby_args reads the common KEYS and ARGV into L and ends the
-- attachments of the runs whose lease is over (runs_reap), so that every
-- seat script sees their seats as expired. uncounted: see lobby_args0.
local function lobby_args(uncounted)
  local L = lobby_args0(uncounted)
  runs_reap(L)
  return L
end

-- lobby_keys_of returns every key of the lobby that lives until it is idle
-- (the seat keys are empty, hence gone, by then). The rooms' histories are
-- not among them: they expire by themselves, Config.IdleTTL after their
-- room's last send or renewal, which is before the lobby's idle expiry.
local function lobby_keys_of(L)
  return {L.rooms, L.open, L.opencap, L.seq, L.records, L.fence, L.ver}
end

-- lobby_retire gives every key of a lobby that has no seat left one and the
-- same expiry time (PEXPIREAT, from the server's clock), so the room counter
-- and the room records disappear together: the counter never goes back
-- while a record exists, and the histories, refreshed only while the lobby
-- had seats, expire no later. Returns true when the lobby is idle (no
-- seat), which the caller reports so that Go drops it from the sweeper's
-- index.
local function lobby_retire(L)
  if redis.call('EXISTS', L.members) == 1 then
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
-- seat (members is empty), and flags L.woke so Go registers the lobby with
-- the sweeper again. L.opencap stands for all: every seat script writes it
-- first (keeping its TTL), and lobby_retire gives them one expiry together.
local function lobby_wake(L)
  if redis.call('EXISTS', L.members) == 1 then
    return
  end
  L.woke = true
  if redis.call('PTTL', L.opencap) >= 0 then
    for _, k in ipairs(lobby_keys_of(L)) do
      redis.call('PERSIST', k)
    end
  end
end

-- lobby_count returns the lobby's seated users (ZCARD members: seats not
-- yet reaped count until they are) and rooms, the stamp that orders this
-- count among the lobby's counts, and 1 when either changed during this
-- script (else 0). Go copies the count into the global lobby index, which
-- is in another Cluster slot, applying a count only when its stamp is at
-- least the one the index holds, so counts that reach the index out of
-- order cannot put an older count back. A change bumps the stamp to
-- max(server time in µs, previous + 1): strictly increasing within the
-- lobby (its scripts run one at a time on one master) and, after the key
-- expired with an idle lobby, still above every stamp handed out before.
-- Stamp 0 means "nothing to index" (no seat, no change, no stamp yet, or a
-- private lobby, which is never listed): no key is written then.
local function lobby_count(L)
  if redis.call('HEXISTS', L.records, 'private') == 1 then
    -- A private room (room_private.lua) is never listed.
    return redis.call('ZCARD', L.members), redis.call('ZCARD', L.rooms), 0, 0
  end
  local online = redis.call('ZCARD', L.members)
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

-- lobby_unseat removes user's seat and attachments, publishing nothing.
local function lobby_unseat(L, user)
  redis.call('ZREM', L.members, user)
  redis.call('ZREM', L.leases, user)
  atts_drop(L, user)
  L.check_idle = true
end

-- lobby_free removes user's seat in room seq and their attachments, puts
-- the room back into L.open and publishes "left".
local function lobby_free(L, seq, user)
  lobby_unseat(L, user)
  redis.call('ZADD', L.open, seq, seq)
  lobby_publish(L, seq, user, 'left')
end

-- lobby_reap removes up to limit seats of the lobby whose lease is over,
-- with their attachments ("left" for each), and puts their rooms back into
-- L.open. Returns the number removed and whether more may be due; records
-- in L.stale whether expired seats are left.
local function lobby_reap(L, limit)
  local gone = redis.call('ZRANGEBYSCORE', L.leases, '-inf', L.now_s, 'LIMIT', 0, limit)
  L.stale = #gone == limit
  if #gone == 0 then
    return 0, false
  end
  local seqs = bulk('ZMSCORE', L.members, {}, gone)
  for i, user in ipairs(gone) do
    lobby_unseat(L, user)
    if seqs[i] then
      local seq = seqstr(seqs[i])
      redis.call('ZADD', L.open, seq, seq)
      lobby_publish(L, seq, user, 'left')
    end
  end
  return #gone, L.stale
end

-- room_users returns the users holding a seat in room seq (live or not yet
-- reaped) and their leases' expiries.
local function room_users(L, seq)
  local users = redis.call('ZRANGEBYSCORE', L.members, seq, seq)
  if #users == 0 then
    return users, {}
  end
  return users, bulk('ZMSCORE', L.leases, {}, users)
end

-- room_live returns the users holding a live seat in room seq. While no
-- seat of the lobby is expired (L.stale false: known from a reap, else one
-- ZCOUNT), every member is live and no lease is read.
local function room_live(L, seq)
  if L.stale == nil then
    L.stale = redis.call('ZCOUNT', L.leases, '-inf', L.now_s) > 0
  end
  if not L.stale then
    return redis.call('ZRANGEBYSCORE', L.members, seq, seq)
  end
  local users, exps = room_users(L, seq)
  local live = {}
  for i, user in ipairs(users) do
    if exps[i] and tonumber(exps[i]) > L.now then
      live[#live + 1] = user
    end
  end
  return live
end

-- lobby_reap_room reaps the expired seats of room seq ("left" for each).
-- Returns the number removed.
local function lobby_reap_room(L, seq)
  local users, exps = room_users(L, seq)
  local n = 0
  for i, user in ipairs(users) do
    if not exps[i] or tonumber(exps[i]) <= L.now then
      lobby_unseat(L, user)
      lobby_publish(L, seq, user, 'left')
      n = n + 1
    end
  end
  if n > 0 then
    redis.call('ZADD', L.open, seq, seq)
  end
  return n
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
-- seat of the user is reaped, "left" published).
local function lobby_held(L)
  local seq = redis.call('ZSCORE', L.members, L.user)
  if not seq then
    return nil
  end
  seq = seqstr(seq)
  local exp = redis.call('ZSCORE', L.leases, L.user)
  if exp and tonumber(exp) > L.now then
    if L.exp > tonumber(exp) then
      redis.call('ZADD', L.leases, L.exp_s, L.user)
    end
    return seq
  end
  lobby_free(L, seq, L.user)
  return nil
end

-- lobby_claim seats L.user in room seq when it has fewer than L.cap seats
-- (a "joined" event). A room found full leaves L.open. Returns true when seated.
local function lobby_claim(L, seq)
  local n = redis.call('ZCOUNT', L.members, seq, seq)
  if n >= L.cap then
    if L.stale == nil then
      L.stale = redis.call('ZCOUNT', L.leases, '-inf', L.now_s) > 0
    end
    if L.stale then
      -- Expired seats the lobby-wide reap did not get to may be here.
      n = n - lobby_reap_room(L, seq)
    end
  end
  if n >= L.cap then
    redis.call('ZREM', L.open, seq)
    return false
  end
  lobby_wake(L)
  redis.call('ZADD', L.members, seq, L.user)
  redis.call('ZADD', L.leases, L.exp_s, L.user)
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
      rooms[#rooms + 1] = room_live(L, seq)
    end
  end
  return {codes, seqs, rooms, lobby_finish(L)}
end
