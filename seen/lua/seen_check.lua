-- seen_check.lua: answer for each of N items whether any kept generation of
-- a user's scalable seen-filter has all of its bits set ("maybe seen") or
-- not ("certainly unseen"). Writes nothing.
--
-- KEYS[1]     the filter's description (hash): field "<g>" = "m k c n" for
--             each kept generation g
-- KEYS[1+s]   bits of slot s (string bitmap), s = 1..S; generation g lives
--             in slot (g mod S) + 1
-- ARGV[1]     the largest bitmap, in bytes, read whole with one GET rather
--             than bit by bit with GETBIT
-- ARGV[2]     N, the number of items
-- ARGV[3]     K, hash values sent per item
-- ARGV[4]     the N*K hash values (item i's K in a row), each 8 bytes
--             big-endian: bit j of a generation of m bits and k hashes is
--             value j mod m, j < k
-- returns     {1, flags}: flags is a string of N characters, '1' for maybe
--             seen and '0' for certainly unseen, in the order of the items;
--             or {0, k} when a kept generation needs k > K hash values

local nslots = #KEYS - 1
local readWhole = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local K = tonumber(ARGV[3])
local pos = ARGV[4]

-- the kept generations, newest first: recent items are the likeliest hits
local gens = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local m, k = string.match(all[i + 1], '^(%d+) (%d+) ')
  if m then
    local g = tonumber(all[i])
    m = tonumber(m)
    gens[#gens + 1] = {g = g, m = m, k = tonumber(k), bits = KEYS[2 + g % nslots],
      A = 281474976710656 % m, B = 4294967296 % m} -- 2^48, 2^32 mod m
  end
end
table.sort(gens, function(a, b) return a.g > b.g end)
for _, gen in ipairs(gens) do
  if gen.k > K then
    return {0, gen.k}
  end
  if math.ceil(gen.m / 8) <= readWhole then
    gen.str = redis.call('GET', gen.bits) or ''
  end
end

local byte = string.byte
local weight = {128, 64, 32, 16, 8, 4, 2, 1} -- of bit p % 8 in its byte

local out = {}
for i = 0, n - 1 do
  local seen = '0'
  for _, gen in ipairs(gens) do
    local str, m, A, B = gen.str, gen.m, gen.A, gen.B
    local hit = true
    for j = 0, gen.k - 1 do
      -- the 64-bit hash value mod m, exactly in doubles (every term is
      -- below 2^48): v = (a b)·2^48 + (c d)·2^32 + (e f g h)
      local at = (i * K + j) * 8 + 1
      local a, b, c, d, e, f, g, h = byte(pos, at, at + 7)
      local p = ((a * 256 + b) * A + (c * 256 + d) * B + ((e * 256 + f) * 256 + g) * 256 + h) % m
      local set
      if str then
        local r = p % 8
        local y = byte(str, (p - r) / 8 + 1)
        local w = weight[r + 1]
        set = y ~= nil and y % (w + w) >= w
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
