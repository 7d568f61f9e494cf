-- tool-health fleet protocol, format 1: helpers every script starts with.
--
-- Every key a script touches is named by the caller (KEYS), and they all lie in one shard
-- (one cluster slot: keys.rs): KEYS[1] is the shard's boot id, KEYS[2] its change counter,
-- the others are listed in each script's header. ARGV[1] is the command events go out with
-- (PUBLISH, or SPUBLISH on a cluster: sharded pub/sub) and ARGV[2] the shard's channel.
-- Every value read is validated here; a value that fails validation is never acted upon: it is
-- reported back ('corrupt' / 'future') and, where the script must write that key, replaced.
-- Every number goes back to the client as a decimal string.
local PUB, CHANNEL = ARGV[1], ARGV[2]
if (PUB ~= 'PUBLISH' and PUB ~= 'SPUBLISH') or type(CHANNEL) ~= 'string' or #KEYS < 2 then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local BOOT, SEQ = KEYS[1], KEYS[2]
local MAXMS = 1099511627775          -- 2^40 - 1 ms: "never"
local MAXN = 4503599627370496        -- 2^52: bound of every stored integer
local LEASE_SLACK = 86400000         -- a lease may outlast our own bound by a day (other configs)
local function S(n) return string.format('%.0f', n) end
-- The server's time in ms, read once per script (every reading in one run is the same instant).
local NOW = nil
local function now_ms()
  if NOW == nil then
    local t = redis.call('TIME')
    NOW = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  return NOW
end
-- A strict non-negative decimal integer no larger than `max`, or nil.
local function int(v, max)
  if type(v) ~= 'string' or #v == 0 or #v > 16 or not string.match(v, '^%d+$') then return nil end
  local n = tonumber(v)
  if n == nil or n > max then return nil end
  return n
end
local function is_id(v)
  return type(v) == 'string' and #v == 16 and string.match(v, '^[0-9a-f]+$') ~= nil
end
local function is_hex(v)
  return type(v) == 'string' and #v >= 2 and #v <= 512 and #v % 2 == 0
    and string.match(v, '^[0-9a-f]+$') ~= nil
end
local function ktype(k) return redis.call('TYPE', k)['ok'] end
local corrupt = 0
-- The shard's boot id: the server time it was first used at. A replica that sees it change
-- knows the shard lost its data (restarted empty, flushed, failed over without it).
local function boot()
  local t = ktype(BOOT)
  if t == 'string' then
    local b = redis.call('GET', BOOT)
    if int(b, MAXN) then return b end
  end
  if t ~= 'none' then redis.call('DEL', BOOT) corrupt = corrupt + 1 end
  local b = S(now_ms())
  redis.call('SET', BOOT, b)
  return b
end
-- The shard's change counter ('0' when none): every change a poll would read goes out as an
-- event, and every event moves the counter on — a poll that finds it where it was has nothing
-- to read. A counter that is no number starts again from the server's clock in µs (above any
-- value it had before), never from a number a replica may have seen.
local function seq()
  local t = ktype(SEQ)
  if t == 'none' then return '0' end
  if t == 'string' then
    local v = redis.call('GET', SEQ)
    if int(v, MAXN) then return v end
  end
  redis.call('DEL', SEQ) corrupt = corrupt + 1
  return '0'
end
local function bump()
  if seq() == '0' then redis.call('SET', SEQ, S(now_ms() * 1000)) end
  redis.call('INCR', SEQ)
end
-- One tool's shared state (key `t`): nil (none), 'corrupt', 'future', or a table.
local function read_state(k)
  local t = ktype(k)
  if t == 'none' then return nil end
  if t ~= 'hash' or redis.call('HLEN', k) > 16 then return 'corrupt' end
  local f = redis.call('HMGET', k, 'v', 'ep', 'st', 'ready', 'cd', 'by')
  local v = int(f[1], 1000000)
  if v == nil or v == 0 then return 'corrupt' end
  if v > 1 then return 'future' end
  local s = { ep = int(f[2], MAXN), st = f[3], ready = int(f[4], MAXN), cd = int(f[5], MAXMS), by = f[6] }
  if s.ep == nil or s.ep == 0 or (s.st ~= 'o' and s.st ~= 'c') or s.ready == nil or s.cd == nil
    or not is_id(s.by) then
    return 'corrupt'
  end
  -- An open episode's cooldown ends at most its own cooldown from now (a trip writes
  -- ready = now + cd): a later end is no replica's, and would hold every replica open for as
  -- long as it says.
  if s.st == 'o' and s.cd < MAXMS and s.ready > now_ms() + s.cd then return 'corrupt' end
  return s
end
-- A state as the client reads it: kind, ep, st, remaining ms, cooldown ms, by.
local function state_fields(s, now)
  if s == nil then return { 'none', '0', 'c', '0', '0', '0000000000000000' } end
  if type(s) ~= 'table' then return { s, '0', 'c', '0', '0', '0000000000000000' } end
  local remaining = 0
  if s.st == 'o' then remaining = math.max(s.ready - now, 0) end
  if s.cd >= MAXMS then remaining = MAXMS end
  return { 'ok', S(s.ep), s.st, S(math.min(remaining, MAXMS)), S(s.cd), s.by }
end
-- Opens episode `ep` in state key `tk`; ends the tool's failure streak (key `kk`, listed in
-- `strk`) and lists the tool in `open`.
local function write_open(tk, kk, strk, open, hex, ep, now, cd, by)
  redis.call('DEL', tk)
  -- A new episode ends the tool's fleet-wide failure streak (see streak.lua).
  redis.call('DEL', kk)
  if ktype(strk) == 'set' then redis.call('SREM', strk, hex) end
  redis.call('HSET', tk, 'v', '1', 'ep', S(ep), 'st', 'o', 'ready', S(now + cd), 'cd', S(cd), 'by', by)
  local ok = ktype(open)
  if ok ~= 'none' and ok ~= 'set' then redis.call('DEL', open) corrupt = corrupt + 1 end
  redis.call('SADD', open, hex)
end
-- The tool's state if episode `ep` is its open one; otherwise nil and the 'stale' answer of
-- claim and settle: {'stale', <state fields>..., boot, corrupt}.
local function open_episode(tk, ep, now, bt)
  local s = read_state(tk)
  if type(s) == 'table' and s.st == 'o' and s.ep == ep then return s, nil end
  local f = state_fields(s, now)
  return nil, { 'stale', f[1], f[2], f[3], f[4], f[5], f[6], bt, S(corrupt) }
end
-- Events: 'v1 <kind> <hex> <a> <b> <c> <d> <e> <by> <boot>', on the shard's channel.
local function publish(kind, hex, a, b, c, d, e, by, bt)
  redis.call(PUB, CHANNEL, table.concat({ 'v1', kind, hex, a, b, c, d, e, by, bt }, ' '))
  bump()
end
-- One tool's operator control (key `c`): nil (none), 'corrupt', 'future', or a table.
local function read_ctl(k)
  local t = ktype(k)
  if t == 'none' then return nil end
  if t ~= 'hash' or redis.call('HLEN', k) > 16 then return 'corrupt' end
  local f = redis.call('HMGET', k, 'v', 'ver', 'mode', 'until', 'shadow', 'rst', 'by')
  local v = int(f[1], 1000000)
  if v == nil or v == 0 then return 'corrupt' end
  if v > 1 then return 'future' end
  local c = { ver = int(f[2], MAXN), mode = int(f[3], 2), untl = int(f[4], MAXN),
    shadow = int(f[5], 1), rst = int(f[6], MAXN), by = f[7] }
  if c.ver == nil or c.mode == nil or c.untl == nil or c.shadow == nil or c.rst == nil
    or not is_id(c.by) then
    return 'corrupt'
  end
  return c
end
-- A control as the client reads it: kind, ver, mode, remaining ms (forced open), shadow, rst.
local function ctl_fields(c, now)
  if type(c) ~= 'table' then return { c == nil and 'none' or c, '0', '0', '0', '0', '0' } end
  local remaining = 0
  if c.mode == 1 then
    if c.untl == 0 then remaining = MAXMS else remaining = math.min(math.max(c.untl - now, 0), MAXMS) end
  end
  return { 'ok', S(c.ver), S(c.mode), S(remaining), S(c.shadow), S(c.rst) }
end
