-- control(prefix, hex, mode, for_ms, shadow, reset, replica)
-- An operator's control, fleet-wide: mode '0' normal, '1' forced open (for `for_ms`; the
-- maximum: until released), '2' forced closed, '-' unchanged; shadow '0' / '1' / '-'; reset
-- '1' also resets the tool everywhere (its open episode closes). Every replica hears it.
-- Returns {ver, boot, corrupt}.
local hex, mode, forms, shadow, reset, me = ARGV[2], ARGV[3], int(ARGV[4], MAXMS), ARGV[5], ARGV[6], ARGV[7]
if not is_hex(hex) or forms == nil or not is_id(me)
  or not (mode == '-' or mode == '0' or mode == '1' or mode == '2')
  or not (shadow == '-' or shadow == '0' or shadow == '1') or not (reset == '0' or reset == '1') then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local c = read_ctl(hex)
if c == 'future' then return redis.error_reply('ERR tool-health: a newer format holds this control') end
if type(c) ~= 'table' then
  if c == 'corrupt' then corrupt = corrupt + 1 end
  c = { ver = 0, mode = 0, untl = 0, shadow = 0, rst = 0 }
end
c.ver = c.ver + 1
if mode ~= '-' then
  c.mode = tonumber(mode)
  c.untl = 0
  if c.mode == 1 and forms < MAXMS then c.untl = now + forms end
end
if shadow ~= '-' then c.shadow = tonumber(shadow) end
if reset == '1' then
  c.rst = c.rst + 1
  local s = read_state(hex)
  if type(s) == 'table' and s.st == 'o' then
    redis.call('HSET', P .. 't:' .. hex, 'st', 'c', 'by', me)
    redis.call('DEL', lease_key(hex, s.ep))
  elseif s == 'corrupt' then
    redis.call('DEL', P .. 't:' .. hex) corrupt = corrupt + 1
  end
  if ktype(P .. 'open') == 'set' then redis.call('SREM', P .. 'open', hex) end
end
local k = P .. 'c:' .. hex
redis.call('DEL', k)
redis.call('HSET', k, 'v', '1', 'ver', S(c.ver), 'mode', S(c.mode), 'until', S(c.untl),
  'shadow', S(c.shadow), 'rst', S(c.rst), 'by', me)
local ck = P .. 'ctls'
local ct = ktype(ck)
if ct ~= 'none' and ct ~= 'set' then redis.call('DEL', ck) corrupt = corrupt + 1 end
redis.call('SADD', ck, hex)
local f = ctl_fields(c, now)
publish('k', hex, f[2], f[3], f[4], f[5], f[6], me, bt)
return { S(c.ver), bt, S(corrupt) }
