-- settle: KEYS boot, seq, t (state), p (the lease of episode `ep`), k (streak), strk, open;
-- ARGV pub, channel, hex, ep, outcome, cooldown_ms, replica.
-- The result of episode `ep`'s probe: outcome 'c' closes the episode (the tool recovered),
-- 'o' opens the next one for `cooldown_ms`. Only for the open episode `ep`, and not while
-- another replica holds its lease. Returns {'closed', ep, ..}, {'new', ep, remaining, cooldown,
-- by, ..}, {'held', holder, ttl, ..} or {'stale', <state fields>..}; boot and corrupt last.
local TK, LK, KK, STRK, OPEN = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local hex, ep, outcome, cd, me = ARGV[3], int(ARGV[4], MAXN), ARGV[5], int(ARGV[6], MAXMS), ARGV[7]
if OPEN == nil or not is_hex(hex) or ep == nil or (outcome ~= 'c' and outcome ~= 'o') or cd == nil
  or not is_id(me) then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local s, stale = open_episode(TK, ep, now, bt)
if stale then return stale end
local lt = ktype(LK)
if lt == 'string' then
  local holder = redis.call('GET', LK)
  local pttl = redis.call('PTTL', LK)
  if is_id(holder) and holder ~= me and pttl > 0 then
    return { 'held', holder, S(pttl), '0', '0', '0', '0', bt, S(corrupt) }
  end
end
if lt ~= 'none' then redis.call('DEL', LK) end
if outcome == 'c' then
  redis.call('HSET', TK, 'st', 'c', 'by', me)
  if ktype(OPEN) == 'set' then redis.call('SREM', OPEN, hex) end
  publish('c', hex, S(ep), '0', '0', '0', '0', me, bt)
  return { 'closed', S(ep), '0', '0', me, '0', '0', bt, S(corrupt) }
end
local nep = math.max(now, ep + 1)
write_open(TK, KK, STRK, OPEN, hex, nep, now, cd, me)
publish('o', hex, S(nep), S(cd), S(cd), '0', '0', me, bt)
return { 'new', S(nep), S(cd), S(cd), me, '0', '0', bt, S(corrupt) }
