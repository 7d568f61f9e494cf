-- streak: KEYS boot, seq, t (state), k (streak), strk, open;
-- ARGV pub, channel, hex, reset, add, threshold, cooldown_ms, replica.
-- The fleet-wide failure streak of a tool while it is closed fleet-wide: every replica adds
-- the failures it saw (`add`) as they happen, after a success of its own (`reset` '1') from
-- zero; the fleet trips when the streak reaches the strictest threshold any replica reported
-- during it (0: that replica's breaker never trips) — a new episode, as trip.lua opens it,
-- which every replica hears. Key `k`: v, n (failures), thr, by; listed in `strk` while the
-- streak is open. Events: 's' when a streak opens (or its threshold gets stricter): the
-- replicas then report their successes; 'z' when a success ends it. Returns
-- {code, n, threshold, ep, cooldown, boot, corrupt} with code 'streak' (open: n failures),
-- 'none' (no streak), 'open' (the tool is open fleet-wide: no streak while it is; `n` is the
-- episode's cooldown and `cooldown` what is left of it, so that a replica that missed the
-- episode's event joins it at its first failure), 'tripped' (this report opened episode ep),
-- 'future' (a newer format holds the tool's state).
local TK, KK, STRK, OPEN = KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local hex, reset, add, thr = ARGV[3], ARGV[4], int(ARGV[5], MAXN), int(ARGV[6], 1000000000)
local cd, me = int(ARGV[7], MAXMS), ARGV[8]
if OPEN == nil or not is_hex(hex) or not (reset == '0' or reset == '1') or add == nil or thr == nil
  or cd == nil or not is_id(me) then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local s = read_state(TK)
if s == 'future' then return { 'future', '0', '0', '0', '0', bt, S(corrupt) } end
if s == 'corrupt' then redis.call('DEL', TK) corrupt = corrupt + 1 s = nil end
local st = ktype(STRK)
if st ~= 'none' and st ~= 'set' then redis.call('DEL', STRK) corrupt = corrupt + 1 end
local n, sthr = 0, 0
local kt = ktype(KK)
if kt == 'hash' then
  local f = redis.call('HMGET', KK, 'v', 'n', 'thr')
  local ok = redis.call('HLEN', KK) <= 16 and f[1] == '1'
  local fn, ft = int(f[2], MAXN), int(f[3], 1000000000)
  if ok and fn ~= nil and ft ~= nil then n, sthr = fn, ft else
    redis.call('DEL', KK) corrupt = corrupt + 1
  end
elseif kt ~= 'none' then
  redis.call('DEL', KK) corrupt = corrupt + 1
end
local before, before_thr = n, sthr
local function over()
  redis.call('DEL', KK)
  redis.call('SREM', STRK, hex)
end
if type(s) == 'table' and s.st == 'o' then
  -- Open fleet-wide: the episode's probe decides, failures meanwhile are no streak.
  if kt ~= 'none' then over() end
  local f = state_fields(s, now)
  return { 'open', f[5], '0', f[2], f[4], bt, S(corrupt) }
end
if reset == '1' then n, sthr = 0, 0 end
n = math.min(n + add, MAXN)
if thr > 0 and (sthr == 0 or thr < sthr) then sthr = thr end
if n > 0 and sthr > 0 and n >= sthr then
  local old = 0
  if type(s) == 'table' then old = s.ep end
  local ep = math.max(now, old + 1)
  write_open(TK, KK, STRK, OPEN, hex, ep, now, cd, me)
  publish('o', hex, S(ep), S(cd), S(cd), '0', '0', me, bt)
  return { 'tripped', S(n), S(sthr), S(ep), S(cd), bt, S(corrupt) }
end
if n == 0 then
  if kt ~= 'none' then over() end
  if before > 0 then publish('z', hex, '0', '0', '0', '0', '0', me, bt) end
  return { 'none', '0', '0', '0', '0', bt, S(corrupt) }
end
redis.call('DEL', KK)
redis.call('HSET', KK, 'v', '1', 'n', S(n), 'thr', S(sthr), 'by', me)
-- A streak nobody adds to for a day is forgotten (a tool nobody calls any more).
redis.call('PEXPIRE', KK, 86400000)
redis.call('SADD', STRK, hex)
if before == 0 or sthr ~= before_thr then
  publish('s', hex, S(n), S(sthr), '0', '0', '0', me, bt)
end
return { 'streak', S(n), S(sthr), '0', '0', bt, S(corrupt) }
