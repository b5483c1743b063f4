-- seen_check.lua: answer for each of N items whether any kept generation of
-- a user's seen-filter has all of its bits set ("maybe seen") or not
-- ("certainly unseen"). Writes nothing.
--
-- KEYS[2s-1]  bits of generation slot s (string bitmap), s = 1..G
-- KEYS[2s]    meta of generation slot s (hash: g m k c n)
-- ARGV[1]     the largest bitmap, in bytes, read whole with one GET rather
--             than bit by bit with GETBIT
-- ARGV[2]     N, the number of items
-- ARGV[3]     number of geometries sent; then for each geometry three
--             arguments: m, k, and the N*k bit positions (item i's k in a
--             row), each 4 bytes big-endian
-- returns     {1, flags}: flags is a string of N characters, '1' for maybe
--             seen and '0' for certainly unseen, in the order of the items;
--             or {0, m1, k1, m2, k2, ...}: the geometries of kept
--             generations that were not sent

local nslots = #KEYS / 2
local readWhole = tonumber(ARGV[1])
local n = tonumber(ARGV[2])

local geo = {}
for j = 0, tonumber(ARGV[3]) - 1 do
  local at = 4 + 3 * j
  geo[ARGV[at] .. ':' .. ARGV[at + 1]] = ARGV[at + 2]
end

local gens = {}
local missing = {}
for s = 1, nslots do
  local v = redis.call('HMGET', KEYS[2 * s], 'm', 'k')
  if v[1] and v[2] then
    local pos = geo[v[1] .. ':' .. v[2]]
    if pos then
      local gen = {bits = KEYS[2 * s - 1], k = tonumber(v[2]), pos = pos}
      if math.ceil(tonumber(v[1]) / 8) <= readWhole then
        gen.str = redis.call('GET', gen.bits) or ''
      end
      gens[#gens + 1] = gen
    else
      missing[#missing + 1] = v[1]
      missing[#missing + 1] = v[2]
    end
  end
end
if #missing > 0 then
  return {0, unpack(missing)}
end

local byte = string.byte
local weight = {128, 64, 32, 16, 8, 4, 2, 1} -- of bit p % 8 in its byte

local out = {}
for i = 0, n - 1 do
  local seen = '0'
  for g = 1, #gens do
    local gen = gens[g]
    local str, pos, k = gen.str, gen.pos, gen.k
    local hit = true
    for j = i * k * 4 + 1, (i + 1) * k * 4, 4 do
      local a, b, c, d = byte(pos, j, j + 3)
      local p = a * 16777216 + b * 65536 + c * 256 + d
      local set
      if str then
        local r = p % 8
        local x = byte(str, (p - r) / 8 + 1)
        local w = weight[r + 1]
        set = x ~= nil and x % (w + w) >= w
      else
        set = redis.call('GETBIT', gen.bits, p) == 1
      end
      if not set then
        hit = false
        break
      end
    end
    if hit then
      seen = '1'
      break
    end
  end
  out[i + 1] = seen
end
return {1, table.concat(out)}
