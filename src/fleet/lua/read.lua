-- read: KEYS boot, seq, open, ctls, strk, then (t, c, k) of each tool;
-- ARGV pub, channel, n, hex_1 .. hex_n.
-- The second half of a poll: the state, control and failure streak of each tool named (those
-- index.lua listed, and those the replica holds fleet state for). A tool no longer open, under
-- a control or streaking leaves that set. Returns {boot, corrupt, count, (13 fields per
-- tool)..., streaks, (hex, n, threshold) per streak}: per tool hex, state kind, ep, st,
-- remaining, cooldown, by, control kind, ver, mode, remaining, shadow, rst.
local n = int(ARGV[3], 100000)
if n == nil or #KEYS ~= 5 + 3 * n then return redis.error_reply('ERR tool-health: bad arguments') end
local OPEN, CTLS, STRK = KEYS[3], KEYS[4], KEYS[5]
local now = now_ms()
local bt = boot()
local function member_of(k)
  local t = ktype(k)
  if t == 'set' then return true end
  if t ~= 'none' then redis.call('DEL', k) corrupt = corrupt + 1 end
  return false
end
local sets = { open = member_of(OPEN), ctls = member_of(CTLS), strk = member_of(STRK) }
local out, count, streaks, scount = {}, 0, {}, 0
for i = 1, n do
  local hex = ARGV[3 + i]
  local tk, ck, kk = KEYS[3 + 3 * i], KEYS[4 + 3 * i], KEYS[5 + 3 * i]
  if not is_hex(hex) then return redis.error_reply('ERR tool-health: bad arguments') end
  local s, c = read_state(tk), read_ctl(ck)
  if s == 'corrupt' then corrupt = corrupt + 1 end
  if c == 'corrupt' then corrupt = corrupt + 1 end
  local f, g = state_fields(s, now), ctl_fields(c, now)
  out[#out + 1] = hex
  for j = 1, 6 do out[#out + 1] = f[j] end
  for j = 1, 6 do out[#out + 1] = g[j] end
  count = count + 1
  -- A tool listed that is no longer open / controlled leaves the list (a newer format's
  -- entries are left alone).
  if sets.open and not (type(s) == 'table' and s.st == 'o') and s ~= 'future' then
    redis.call('SREM', OPEN, hex)
  end
  if sets.ctls and not (type(c) == 'table' and (c.mode ~= 0 or c.shadow ~= 0)) and c ~= 'future' then
    redis.call('SREM', CTLS, hex)
  end
  -- Its failure streak (streak.lua): the replicas report their successes while one is open.
  local sn, sthr = nil, nil
  if ktype(kk) == 'hash' then
    local h = redis.call('HMGET', kk, 'v', 'n', 'thr')
    if h[1] == '1' then sn, sthr = int(h[2], MAXN), int(h[3], 1000000000) end
  end
  if sn ~= nil and sthr ~= nil and sn > 0 then
    streaks[#streaks + 1] = hex
    streaks[#streaks + 1] = S(sn)
    streaks[#streaks + 1] = S(sthr)
    scount = scount + 1
  elseif sets.strk then
    redis.call('SREM', STRK, hex)
  end
end
local head = { bt, S(corrupt), S(count) }
for i = 1, #out do head[#head + 1] = out[i] end
head[#head + 1] = S(scount)
for i = 1, #streaks do head[#head + 1] = streaks[i] end
return head
