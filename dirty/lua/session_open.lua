-- session_open: start a session with every section dirty, or renew it.
--
-- KEYS[1] owner   STRING user id; exists while the session lives
-- KEYS[2] mask    STRING dirty bitmap
-- KEYS[3] cursor  HASH   room -> last delivered message id
-- ARGV[1] user id
-- ARGV[2] session TTL (ms)
-- ARGV[3..] bit offsets to set on a new session (every section)
-- returns 1 when the session is new, 0 when it was renewed
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('DEL', KEYS[3])
  for i = 3, #ARGV do
    redis.call('SETBIT', KEYS[2], ARGV[i], 1)
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 0
