-- lease: KEYS boot, seq, t (state), p (the lease of episode `ep`);
-- ARGV pub, channel, hex, ep, replica, op, ms.
-- The holder's hand on episode `ep`'s probe lease (claim.lua takes it):
-- * 'extend': this replica's gate granted the probe, so the lease must cover the probe in
--   flight: it lasts at least `ms` more (taken again if it lapsed and nobody holds it);
-- * 'release': the probe was given back without a verdict (a caller error, a cancellation):
--   the lease goes, and the next claim decides the probe again.
-- Another replica's lease is never touched. Returns {code, holder, ttl_ms, boot, corrupt} with
-- code 'held' (this replica holds it for ttl more), 'released', 'lost' (another replica holds
-- it) or 'none' (nobody does), or {'stale', <state fields>..., boot, corrupt} when the episode
-- is not the open one any more.
local TK, LK = KEYS[3], KEYS[4]
local hex, ep, me, op, ms = ARGV[3], int(ARGV[4], MAXN), ARGV[5], ARGV[6], int(ARGV[7], MAXMS)
if LK == nil or not is_hex(hex) or ep == nil or not is_id(me) or ms == nil
  or not (op == 'extend' or op == 'release') then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local s, stale = open_episode(TK, ep, now, bt)
if stale then return stale end
local lt = ktype(LK)
local holder, pttl = nil, -1
if lt == 'string' then
  holder = redis.call('GET', LK)
  pttl = redis.call('PTTL', LK)
end
if lt ~= 'none' and not (is_id(holder) and pttl > 0
    and pttl <= math.max(s.ready - now, 0) + math.max(ms, 0) + LEASE_SLACK) then
  -- Not a lease any replica wrote (wrong type, no expiry, an unbounded one, not an id).
  redis.call('DEL', LK)
  corrupt = corrupt + 1
  holder = nil
end
if holder ~= nil and holder ~= me then
  return { 'lost', holder, S(pttl), bt, S(corrupt) }
end
if op == 'release' then
  if holder == nil then return { 'none', me, '0', bt, S(corrupt) } end
  redis.call('DEL', LK)
  return { 'released', me, '0', bt, S(corrupt) }
end
if holder == nil or pttl < ms then
  redis.call('SET', LK, me, 'PX', math.max(ms, 1))
  pttl = math.max(ms, 1)
end
return { 'held', me, S(pttl), bt, S(corrupt) }
