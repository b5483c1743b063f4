-- presence_offline: a user's connection to one node closed cleanly.
--
-- KEYS[1] user  HASH  node:<node> -> claim expiry (unix ms), run:<node> ->
--                     the run (process) that wrote the claim, rooms:<node>
--                     -> JSON, conns:<node> -> JSON, last_seen (unix ms)
-- ARGV[1] node id
-- ARGV[2] now (unix ms)
-- ARGV[3] retention (ms): the real expiry of KEYS[1]
-- ARGV[4] the calling node's run id ("" = none)
-- ARGV[5] retention of a guest's record (ms): used instead of ARGV[3] when
--         the last Touch marked the user a guest (field guest)
-- returns {removed, live}: removed is 1 when the node held the user (its
-- claim is dropped and last_seen is now), 0 when it did not (nothing
-- changed); live is the number of other nodes that may still hold the
-- user: a claim within its expiry, or one a run keeps (whether that run is
-- alive is in the node registry, another slot: a dead node's user stays
-- counted until its entry in the online index runs out)
local now = tonumber(ARGV[2])
local node = ARGV[1]
local exp = redis.call('HGET', KEYS[1], 'node:' .. node)
local run = redis.call('HGET', KEYS[1], 'run:' .. node)
local removed = 0
if exp then
  redis.call('HDEL', KEYS[1], 'node:' .. node, 'run:' .. node, 'rooms:' .. node, 'conns:' .. node)
  if tonumber(exp) > now or (run and ARGV[4] ~= '' and run == ARGV[4]) then
    removed = 1
    redis.call('HSET', KEYS[1], 'last_seen', ARGV[2])
    if redis.call('HEXISTS', KEYS[1], 'guest') == 1 and ARGV[5] then
      redis.call('PEXPIRE', KEYS[1], ARGV[5])
    else
      redis.call('PEXPIRE', KEYS[1], ARGV[3])
    end
  end
end
local live = 0
local fields = redis.call('HGETALL', KEYS[1])
local runs = {}
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 4) == 'run:' then
    runs[string.sub(fields[i], 5)] = true
  end
end
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 5) == 'node:' and
    (tonumber(fields[i + 1]) > now or runs[string.sub(fields[i], 6)]) then
    live = live + 1
  end
end
return {removed, live}
