-- poll(prefix, max, n, hex_1 .. hex_n)
-- What a replica reads every poll interval: the boot id, then the state and control of every
-- tool it asked about (the ones it holds fleet state for) and of up to `max` tools open or
-- under a control fleet-wide, then up to `max` open failure streaks. Returns
-- {boot, corrupt, count, (13 fields per tool)..., streaks, (hex, n, threshold) per streak}:
-- per tool hex, state kind, ep, st, remaining, cooldown, by, control kind, ver, mode,
-- remaining, shadow, rst.
local max, n = int(ARGV[2], 100000), int(ARGV[3], 100000)
if max == nil or n == nil then return redis.error_reply('ERR tool-health: bad arguments') end
local now = now_ms()
local bt = boot()
local out, seen, count = {}, {}, 0
local function add(hex)
  if seen[hex] then return end
  seen[hex] = true
  local s = read_state(hex)
  local c = read_ctl(hex)
  if s == 'corrupt' then corrupt = corrupt + 1 end
  if c == 'corrupt' then corrupt = corrupt + 1 end
  local f, g = state_fields(s, now), ctl_fields(c, now)
  out[#out + 1] = hex
  for i = 1, 6 do out[#out + 1] = f[i] end
  for i = 1, 6 do out[#out + 1] = g[i] end
  count = count + 1
  return s, c
end
for i = 1, n do
  local hex = ARGV[3 + i]
  if is_hex(hex) then add(hex) end
end
-- A set member that is no tool (garbage) or no longer open / controlled is dropped.
for _, set in ipairs({ 'open', 'ctls' }) do
  local k = P .. set
  local t = ktype(k)
  if t == 'set' then
    for _, hex in ipairs(redis.call('SRANDMEMBER', k, max)) do
      if not is_hex(hex) then
        redis.call('SREM', k, hex) corrupt = corrupt + 1
      elseif not seen[hex] then
        local s, c = add(hex)
        local live
        if set == 'open' then live = type(s) == 'table' and s.st == 'o'
        else live = type(c) == 'table' and (c.mode ~= 0 or c.shadow ~= 0) end
        if not live and s ~= 'future' and c ~= 'future' then redis.call('SREM', k, hex) end
      end
    end
  elseif t ~= 'none' then
    redis.call('DEL', k) corrupt = corrupt + 1
  end
end
-- Open failure streaks (streak.lua): the replicas report their successes while one is open.
local streaks, scount = {}, 0
local sk = P .. 'strk'
local skt = ktype(sk)
if skt == 'set' then
  for _, hex in ipairs(redis.call('SRANDMEMBER', sk, max)) do
    local n, thr = nil, nil
    if is_hex(hex) then
      local k = P .. 'k:' .. hex
      if ktype(k) == 'hash' then
        local f = redis.call('HMGET', k, 'v', 'n', 'thr')
        if f[1] == '1' then n, thr = int(f[2], MAXN), int(f[3], 1000000000) end
      end
    else
      corrupt = corrupt + 1
    end
    if n ~= nil and thr ~= nil and n > 0 then
      streaks[#streaks + 1] = hex
      streaks[#streaks + 1] = S(n)
      streaks[#streaks + 1] = S(thr)
      scount = scount + 1
    else
      redis.call('SREM', sk, hex)
    end
  end
elseif skt ~= 'none' then
  redis.call('DEL', sk) corrupt = corrupt + 1
end
local head = { bt, S(corrupt), S(count) }
for i = 1, #out do head[#head + 1] = out[i] end
head[#head + 1] = S(scount)
for i = 1, #streaks do head[#head + 1] = streaks[i] end
return head
