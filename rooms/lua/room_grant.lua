-- room_grant.lua: let a user into a private room (room_private.lua) or
-- take them out of its users: the "private" field of the lobby's records,
-- which every seat script reads. The users the room was made with are kept
-- in the field "made" at the first change, so a retry of the room's
-- creation still answers the same room.
--
-- KEYS[1]  records  HASH  room number -> record JSON; "private" -> the
--                         room's users, space-separated; "made" -> the
--                         users it was made for, once a grant changed them
-- ARGV[1]  the room's number
-- ARGV[2]  the user
-- ARGV[3]  "grant" or "revoke"
-- ARGV[4]  the most users a private room may have
--
-- Returns {1} when the users changed, {0} when nothing was to change (a
-- grant of a user who may enter already, a revoke of one who may not):
-- a retry is answered {0} and writes nothing; {-1} when the room does not
-- exist; {-2} when it is not private (a public room is anyone's); {-3}
-- when a grant would pass ARGV[4] users.
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return {-1}
end
local private = redis.call('HGET', KEYS[1], 'private')
if not private then
  return {-2}
end
local users, found = {}, false
local me = string.lower(ARGV[2]) -- names compare canonically (package names)
for u in string.gmatch(private, '%S+') do
  if string.lower(u) == me then
    found = true
  else
    users[#users + 1] = u
  end
end
if ARGV[3] == 'grant' then
  if found then
    return {0}
  end
  if #users >= tonumber(ARGV[4]) then
    return {-3}
  end
  users[#users + 1] = ARGV[2]
elseif not found then
  return {0}
end
if redis.call('HEXISTS', KEYS[1], 'made') == 0 then
  redis.call('HSET', KEYS[1], 'made', private)
end
redis.call('HSET', KEYS[1], 'private', table.concat(users, ' '))
return {1}
