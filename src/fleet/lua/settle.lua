-- settle(prefix, hex, ep, outcome, cooldown_ms, replica)
-- The result of episode `ep`'s probe: outcome 'c' closes the episode (the tool recovered),
-- 'o' opens the next one for `cooldown_ms`. Only for the open episode `ep`, and not while
-- another replica holds its lease. Returns {'closed', ep, ..}, {'new', ep, remaining, cooldown,
-- by, ..}, {'held', holder, ttl, ..} or {'stale', <state fields>..}; boot and corrupt last.
local hex, ep, outcome, cd, me = ARGV[2], int(ARGV[3], MAXN), ARGV[4], int(ARGV[5], MAXMS), ARGV[6]
if not is_hex(hex) or ep == nil or (outcome ~= 'c' and outcome ~= 'o') or cd == nil or not is_id(me) then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local s, stale = open_episode(hex, ep, now, bt)
if stale then return stale end
local lk = lease_key(hex, ep)
local lt = ktype(lk)
if lt == 'string' then
  local holder = redis.call('GET', lk)
  local pttl = redis.call('PTTL', lk)
  if is_id(holder) and holder ~= me and pttl > 0 then
    return { 'held', holder, S(pttl), '0', '0', '0', '0', bt, S(corrupt) }
  end
end
if lt ~= 'none' then redis.call('DEL', lk) end
if outcome == 'c' then
  redis.call('HSET', P .. 't:' .. hex, 'st', 'c', 'by', me)
  if ktype(P .. 'open') == 'set' then redis.call('SREM', P .. 'open', hex) end
  publish('c', hex, S(ep), '0', '0', '0', '0', me, bt)
  return { 'closed', S(ep), '0', '0', me, '0', '0', bt, S(corrupt) }
end
local nep = math.max(now, ep + 1)
write_open(hex, nep, now, cd, me)
publish('o', hex, S(nep), S(cd), S(cd), '0', '0', me, bt)
return { 'new', S(nep), S(cd), S(cd), me, '0', '0', bt, S(corrupt) }
