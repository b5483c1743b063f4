-- message_send.lua: for each of n says in one lobby, in order: take a token
-- from the sender's say bucket, append the message to its room's history
-- and publish it, so the ids on each channel come in history order; a
-- refused say writes nothing but its key's claim. One call carries the says of a lobby that one
-- send commit (SendMany, and the says of concurrent callers queued behind
-- it) has for the lobby: the per-call cost of EVALSHA (the script lookup,
-- its keys and arguments parsed, the Lua call) is paid once for them all,
-- not once per say. Every key is in the lobby's hash-tag slot, so this is
-- one script on one Redis Cluster shard.
--
-- KEYS[1]  rooms    ZSET    every room number of the lobby
-- KEYS[2]  members  ZSET    user -> room number of the user's seat
-- KEYS[3]  leases   ZSET    user -> the seat's lease expiry (ms)
-- KEYS[4]  rest     ZSET    user -> room number, for users with a REST attachment
-- and for say i (1..n), at 4 + 4(i-1):
-- +1       history  STREAM  the room's messages: from, text, ts
-- +2       rate     STRING  the sender's say bucket in the lobby: "<tokens> <at ms>"
-- +3       said     STRING  the say recorded under the sender's idempotency
--                           key, or under "~<call>/<i>" for a say without
--                           one: "<call>/<i> <room> <text hash> <stream id> <ts>"
-- +4       claim    STRING  the key's claim in the user's slot (see the flag k),
--                           written when the say is stored: with ARGV[9]
--                           the say's record, "<room id> <text hash>
--                           <call>/<i> <stream id> <ts>" (said is then not
--                           written); without, "<room id> <text hash>" and the
--                           record in said. said again for a say without k
-- and last, when ARGV[8] is "1":
-- KEYS[#KEYS] counter STRING the global message counter (one INCRBY of the
--                           says this call stored)
-- ARGV[1]  now, unix ms (every message's ts)
-- ARGV[2]  history cap (XADD MAXLEN ~)
-- ARGV[3]  PUBLISH or SPUBLISH
-- ARGV[4]  the history's TTL, ms (the lobby's idle TTL), from this send
-- ARGV[5]  the event JSON up to the message id (the same for every say)
-- ARGV[6]  the lobby's channel prefix: a room's channel is it .. room number
-- ARGV[7]  the send call ("<call>"): say i is "<call>/<i>" (+7)
-- ARGV[8]  "1" when this script counts what it stores on KEYS[#KEYS]: a
--          Redis that is not a Cluster, where any key may be in a script;
--          "" on a Cluster, where the counter is another slot's (SendMany
--          counts in a script of its own)
-- ARGV[9]  "1" when a keyed say's record is kept in its claim (+4) instead
--          of said: every live node reads it there (rooms.SetClaimRecords);
--          records are then read in both places. "2" when, besides, that
--          has been so for long enough that no keyed say's record can be
--          left in said (twice its TTL, on this node's clock): a free
--          claim proves the say new, and said is not read. "" when
--          records go to said
-- ARGV[10] say rate, tokens per second (<= 0: no limit), and
-- ARGV[11] bucket size (>= 1), the same for every say of the call (the
--          node calls apart for says with other ones)
-- ARGV[12] the lobby's room ids' start, "<lobby>-": room n's id is it .. n
-- and for say i, at 12 + 8(i-1) (each argument is a string Redis makes
-- and Lua interns, then collects: a say passes what it cannot do without):
-- +1       room number
-- +2       user
-- +3       text
-- +4       the event JSON after the message id
-- +5       how long said (and the claim) is kept, ms
-- +6       the text's hash (hex)
-- +7       the say's place in the call ("<i>")
-- +8       flags, any of, in this order:
--          s  a message of the system (SendOptions.System) or of the
--             application's backend (SendOptions.Server, from +2): no
--             seat is checked, and no bucket (its call's rate is 0)
--          k  bind the idempotency key to "<room id> <text hash>" in its
--             claim in the user's slot (+4, kept as long as said): on a
--             Redis that is not a Cluster, where the script runs alone,
--             so a GET first and a SET PX when the say is stored bind it
--             as a SET NX would. Not for a say without a key, nor on a
--             Cluster, where SendMany claims in a round trip before (SET
--             NX GET)
--          r  the node refreshes the history's TTL with this send (at
--             most once per room per IdleTTL/48, as Renew does); without
--             it the TTL is set only on a history this send creates
--          d  a WAIT follows this call on its connection (durability
--             "replica"): a say answered from its record (-4) rewrites
--             the record as it is (SET KEEPTTL XX), so the WAIT covers a
--             write of this connection that replicates after the say
--             itself. WAIT is documented to cover only its connection's
--             writes, and a replay otherwise writes nothing
--
-- Returns one reply per say, in order, each as follows: {id, rest}: the
-- stream id "ms-seq" of the new message, published as ARGV[5] .. id
-- zero-padded to "%013d-%06d" .. (+4), and the number of users of the room
-- with a REST attachment; {0} when the user holds no live seat in the
-- room; {-1} when the room does not exist; {-2, ms} when the bucket is
-- empty: a token is there again in ms. {-4, id, ts, call/i, rest} when
-- the claim or said already recorded this say (same room, same text), which is not sent
-- again: nothing is written, published or taken; {-3} when it recorded
-- another room's or text's say. The records are checked before the seat
-- and the bucket (the say was applied: its answer stands even if the seat
-- has gone since) and written with the XADD. A say refused binds its
-- key ("<room id> <text hash>" in its claim, as a SET NX before the checks
-- would have), writes nothing else, and does not stop the next.
--
-- The commands of an accepted user's say inside the script, each with its
-- reason: 7 when the sender's bucket had filled up and expired since the
-- last say, as it has for most says, 8 otherwise (and a share of the
-- call's EVALSHA, EXISTS and, on a Redis that is not a Cluster, one
-- INCRBY). On a Cluster a keyed say's claim is a round trip of its own,
-- and the counter a script call. On a Redis that is not a Cluster a keyed
-- say reads its claim instead of said once claim records are settled
-- (ARGV[9] "2", at once in a deployment that never stored a message:
-- Messages.FollowClaimRecords); one more GET before. One EVALSHA per
-- lobby per send commit rather than one per say:
--   GET claim        a keyed say (k): the key used for another room or
--                    text in another lobby is refused; a claim that holds
--                    its say's record (ARGV[9]) answers a retry itself.
--                    A GET, and the SET below once the say is stored,
--                    rather than a SET NX GET now and a SET KEEPTTL then:
--                    one write a say (a refused say's is its claim)
--   GET said         exactly once: a retried say (client, go-redis after a
--                    timeout, reconnect) is answered with its first result.
--                    The one record of a say without a key, and of every
--                    say on a Cluster; for a keyed say read even when its
--                    claim was free until ARGV[9] is "2": v0.1.0 recorded
--                    says here without a claim, and this version with
--                    claim records off, and such a say may be retried on
--                    a node with them on during a rolling upgrade
--   ZSCORE members   the seat check: the sender's seat is in this room
--                    (the score's text is the room number's) ...
--   ZSCORE leases    ... and its lease is live. A live seat in the room
--                    proves the room (rooms are never removed from KEYS[1]
--                    while a seat is in them), so KEYS[1] is read only for
--                    the system's say and to tell a refusal's reason
--   SET rate NX GET  the token bucket (ratelimit.BucketLua), one string
--                    with its expiry: a missing bucket is a full one, so
--                    one command writes it less the token; a bucket
--                    still there is answered, and written again (SET
--                    rate PX). Was GET and SET (one command more for
--                    most says), and before that HMGET, HSET, PEXPIRE
--   XADD NOMKSTREAM  the append; the stream id orders the room
--   PEXPIRE history  only when (r) asks or the XADD had to create the
--                    stream (a first message, or a history expired or lost):
--                    a history never lives without a TTL
--   SET said PX      records the say for the retries above; with ARGV[9]
--                    a keyed say's record goes into its claim instead (SET
--                    claim PX): one new key with a TTL, the dearest write
--                    of a say, rather than two. Without ARGV[9] a keyed
--                    say's claim is bound ("<room id> <hash>") beside it
--   PUBLISH          the delivery, inside the script so ids come in order
--   ZCOUNT rest      HasREST: whether the room's REST users are to be
--                    marked for polling; O(log N), no node knows it; once
--                    per room per call, and only in a lobby that has a
--                    REST user at all (one EXISTS per call tells)
--   INCRBY counter   ARGV[8]: the says are counted with their XADDs, one
--                    INCRBY per call, so a script run twice (a retried
--                    pipeline) counts them once
local now = tonumber(ARGV[1])
local rate, burst = tonumber(ARGV[10]), tonumber(ARGV[11])
local stored = 0
-- rest counts a room's REST users once per call: nothing here changes them.
-- A lobby with no REST user at all (no KEYS[4]: an empty ZSET does not
-- exist) is found so once per call, and no room's are counted.
local counted = {}
local anyRest
local function rest(room)
  if anyRest == nil then
    anyRest = redis.call('EXISTS', KEYS[4]) == 1
  end
  if not anyRest then
    return 0
  end
  local n = counted[room]
  if not n then
    n = redis.call('ZCOUNT', KEYS[4], room, room)
    counted[room] = n
  end
  return n
end
-- refused binds the key of say k, a (when it binds one, keyed, and it is
-- free) to the say all the same, as a claim taken before the checks would
-- have (a key is bound to its first say, stored or not), and returns reply.
local function refused(k, a, keyed, prev, reply)
  if keyed and not prev then
    redis.call('SET', KEYS[k + 4], ARGV[12] .. ARGV[a + 1] .. ' ' .. ARGV[a + 6], 'PX', ARGV[a + 5])
  end
  return reply
end
local function say(k, a)
  local room, user, text = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local said, hash, flags = KEYS[k + 3], ARGV[a + 6], ARGV[a + 8]
  local keyed = flags ~= '' and string.find(flags, 'k', 1, true) ~= nil
  local prev
  if keyed then
    prev = redis.call('GET', KEYS[k + 4])
    local bound = prev and ARGV[12] .. room .. ' ' .. hash
    if prev and prev ~= bound then
      -- another message's claim, or this say's record
      if string.sub(prev, 1, #bound + 1) ~= bound .. ' ' then
        return {-3}
      end
      local call, id, ts = string.match(prev, ' (%S+) (%S+) (%S+)$')
      if string.find(flags, 'd', 1, true) then
        redis.call('SET', KEYS[k + 4], prev, 'KEEPTTL', 'XX')
      end
      return {-4, id, ts, call, rest(room)}
    end
  end
  if not keyed or prev or ARGV[9] ~= '2' then
    local rec = redis.call('GET', said)
    if rec then
      local call, r, h, id, ts = string.match(rec, '^(%S+) (%S+) (%S+) (%S+) (%S+)$')
      if r ~= room or h ~= hash then
        return {-3}
      end
      if flags ~= '' and string.find(flags, 'd', 1, true) then
        redis.call('SET', said, rec, 'KEEPTTL', 'XX')
      end
      return {-4, id, ts, call, rest(room)}
    end
  end
  if flags ~= '' and string.find(flags, 's', 1, true) then
    if not redis.call('ZSCORE', KEYS[1], room) then
      return refused(k, a, keyed, prev, {-1})
    end
  else
    local at = redis.call('ZSCORE', KEYS[2], user)
    local exp = at and redis.call('ZSCORE', KEYS[3], user)
    -- The seat's room is compared as text: ZSCORE answers a whole score
    -- as its digits ("%.17g" of 37 is "37"), as the node writes the room
    -- number (+1), so the text is the same exactly when the number is,
    -- without a number made of either
    if at ~= room or not exp or tonumber(exp) <= now then
      if not redis.call('ZSCORE', KEYS[1], room) then
        return refused(k, a, keyed, prev, {-1})
      end
      return refused(k, a, keyed, prev, {0})
    end
  end
  if rate > 0 then
    local wait = take_token(KEYS[k + 2], now, rate, burst)
    if wait > 0 then
      return refused(k, a, keyed, prev, {-2, wait})
    end
  end
  local hist = KEYS[k + 1]
  local id = redis.call('XADD', hist, 'NOMKSTREAM', 'MAXLEN', '~', ARGV[2], '*',
    'from', user, 'text', text, 'ts', ARGV[1])
  local fresh = flags ~= '' and string.find(flags, 'r', 1, true) ~= nil
  if not id then
    id = redis.call('XADD', hist, 'MAXLEN', '~', ARGV[2], '*',
      'from', user, 'text', text, 'ts', ARGV[1])
    fresh = true
  end
  -- The sender is seated (or the system spoke): the lobby is not idle, and
  -- its keys (the room counter among them) expire no sooner than this, but
  -- for the throttle (r): at most IdleTTL/48 sooner.
  if fresh then
    redis.call('PEXPIRE', hist, ARGV[4])
  end
  -- Each record is one concatenation: Lua joins a chain of .. at once,
  -- into one new string (the say's tag, "<call>/<i>", is not made apart)
  if keyed and ARGV[9] ~= '' then
    redis.call('SET', KEYS[k + 4], ARGV[12] .. room .. ' ' .. hash .. ' ' .. ARGV[7] .. '/' .. ARGV[a + 7] .. ' ' .. id .. ' ' .. ARGV[1], 'PX', ARGV[a + 5])
  else
    if keyed and not prev then
      redis.call('SET', KEYS[k + 4], ARGV[12] .. room .. ' ' .. hash, 'PX', ARGV[a + 5])
    end
    redis.call('SET', said, ARGV[7] .. '/' .. ARGV[a + 7] .. ' ' .. room .. ' ' .. hash .. ' ' .. id .. ' ' .. ARGV[1], 'PX', ARGV[a + 5])
  end
  -- The event carries the id zero-padded ("%013d-%06d"): its two halves
  -- are cut at the dash, and the event joined in one concatenation (the
  -- padding's zeros are short strings Lua already holds)
  local dash = string.find(id, '-', 1, true)
  local event = ARGV[5] .. string.rep('0', 14 - dash) .. string.sub(id, 1, dash) ..
    string.rep('0', 6 - (#id - dash)) .. string.sub(id, dash + 1) .. ARGV[a + 4]
  if ARGV[3] == 'SPUBLISH' then
    redis.call('SPUBLISH', ARGV[6] .. room, event)
  else
    redis.call('PUBLISH', ARGV[6] .. room, event)
  end
  stored = stored + 1
  return {id, rest(room)}
end
local out = {}
-- A command's error stops the script, and what it stored stays: it is
-- counted before the error goes back, as the command's own error reply
-- ("OOM …", "WRONGTYPE …"; error() would prefix the script's position).
local ok, err = pcall(function()
  for i = 1, (#ARGV - 12) / 8 do
    out[i] = say(4 + 4 * (i - 1), 12 + 8 * (i - 1))
  end
end)
if stored > 0 and ARGV[8] == '1' then
  redis.call('INCRBY', KEYS[#KEYS], stored)
end
if not ok then
  if type(err) == 'table' then
    return err
  end
  return redis.error_reply(err)
end
return out
