-- control: KEYS boot, seq, t (state), c (control), ctls, open;
-- ARGV pub, channel, hex, mode, for_ms, shadow, reset, replica.
-- An operator's control, fleet-wide: mode '0' normal, '1' forced open (for `for_ms`; the
-- maximum: until released), '2' forced closed, '-' unchanged; shadow '0' / '1' / '-'; reset
-- '1' also resets the tool everywhere (its open episode closes; the episode's probe lease, if
-- any, expires on its own: a closed episode's lease grants nothing). Every replica hears it.
-- Returns {ver, boot, corrupt}.
local TK, CK, CTLS, OPEN = KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local hex, mode, forms, shadow, reset, me = ARGV[3], ARGV[4], int(ARGV[5], MAXMS), ARGV[6], ARGV[7], ARGV[8]
if OPEN == nil or not is_hex(hex) or forms == nil or not is_id(me)
  or not (mode == '-' or mode == '0' or mode == '1' or mode == '2')
  or not (shadow == '-' or shadow == '0' or shadow == '1') or not (reset == '0' or reset == '1') then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local c = read_ctl(CK)
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
  local s = read_state(TK)
  if type(s) == 'table' and s.st == 'o' then
    redis.call('HSET', TK, 'st', 'c', 'by', me)
  elseif s == 'corrupt' then
    redis.call('DEL', TK) corrupt = corrupt + 1
  end
  if ktype(OPEN) == 'set' then redis.call('SREM', OPEN, hex) end
end
redis.call('DEL', CK)
redis.call('HSET', CK, 'v', '1', 'ver', S(c.ver), 'mode', S(c.mode), 'until', S(c.untl),
  'shadow', S(c.shadow), 'rst', S(c.rst), 'by', me)
local ct = ktype(CTLS)
if ct ~= 'none' and ct ~= 'set' then redis.call('DEL', CTLS) corrupt = corrupt + 1 end
redis.call('SADD', CTLS, hex)
local f = ctl_fields(c, now)
publish('k', hex, f[2], f[3], f[4], f[5], f[6], me, bt)
return { S(c.ver), bt, S(corrupt) }
