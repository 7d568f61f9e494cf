-- claim: KEYS boot, seq, t (state), p (the lease of episode `ep`);
-- ARGV pub, channel, hex, ep, replica, lease_ms.
-- The single probe of episode `ep`: set-if-absent with expiry. The lease lasts until the
-- episode's cooldown ends (server time) plus `lease_ms`. Returns {code, holder, ttl_ms, boot,
-- corrupt} with code 'won' | 'lost', or {'stale', <state fields>..., boot, corrupt} when the
-- episode is not the open one any more.
local TK, LK = KEYS[3], KEYS[4]
local hex, ep, me, lease = ARGV[3], int(ARGV[4], MAXN), ARGV[5], int(ARGV[6], MAXMS)
if LK == nil or not is_hex(hex) or ep == nil or not is_id(me) or lease == nil then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local s, stale = open_episode(TK, ep, now, bt)
if stale then return stale end
local ttl = math.max(s.ready - now, 0) + lease
local lt = ktype(LK)
if lt ~= 'none' then
  local holder, pttl = nil, -1
  if lt == 'string' then
    holder = redis.call('GET', LK)
    pttl = redis.call('PTTL', LK)
  end
  if is_id(holder) and pttl > 0 and pttl <= math.max(s.ready - now, 0) + lease + LEASE_SLACK then
    return { holder == me and 'won' or 'lost', holder, S(pttl), bt, S(corrupt) }
  end
  -- Not a lease any replica wrote (wrong type, no expiry, an unbounded one, not an id).
  redis.call('DEL', LK)
  corrupt = corrupt + 1
end
redis.call('SET', LK, me, 'PX', math.max(ttl, 1))
return { 'won', me, S(ttl), bt, S(corrupt) }
