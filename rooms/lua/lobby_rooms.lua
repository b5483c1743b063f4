-- lobby_rooms.lua: every room of a lobby with its live members (read only).
--
-- KEYS[1]  rooms    ZSET  every room number of the lobby
-- KEYS[2]  members  ZSET  user -> room number
-- KEYS[3]  leases   ZSET  user -> the seat's lease expiry (ms)
-- ARGV[1]  now, unix ms
--
-- Returns {room number, {live members}, room number, {live members}, ...},
-- lowest room number first.
local now = tonumber(ARGV[1])
local seqs = redis.call('ZRANGE', KEYS[1], 0, -1)
if #seqs == 0 then
  return {}
end
local byroom = {}
local all = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
local users = {}
for i = 1, #all, 2 do
  users[#users + 1] = all[i]
end
local exps = {}
for i = 1, #users, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #users) do
    chunk[#chunk + 1] = users[j]
  end
  local v = redis.call('ZMSCORE', KEYS[3], unpack(chunk))
  for j = 1, #v do
    exps[#exps + 1] = v[j]
  end
end
for i, user in ipairs(users) do
  if exps[i] and tonumber(exps[i]) > now then
    local seq = string.format('%d', tonumber(all[2 * i]))
    local list = byroom[seq]
    if not list then
      list = {}
      byroom[seq] = list
    end
    list[#list + 1] = user
  end
end
local out = {}
for _, seq in ipairs(seqs) do
  out[#out + 1] = seq
  out[#out + 1] = byroom[seq] or {}
end
return out
