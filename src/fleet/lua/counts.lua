-- counts(prefix, width_ms, n, (hex, successes, failures) * n)
-- Adds each replica's new counts (sent once, never again) to the tool's time bucket by server
-- time, and answers the fleet's window per tool: the current bucket and the 8 before it, as
-- the local window counts. Returns {boot, corrupt, (hex, successes, failures) * n}; a tool whose
-- window sums past the bound of every stored integer is answered ('-', '-').
local width, n = int(ARGV[2], MAXMS), int(ARGV[3], 10000)
if width == nil or width == 0 or n == nil then return redis.error_reply('ERR tool-health: bad arguments') end
local now = now_ms()
local bt = boot()
local cur = math.floor(now / width)
local out = { bt, '0' }
for i = 0, n - 1 do
  local hex, ds, df = ARGV[4 + 3 * i], int(ARGV[5 + 3 * i], MAXN), int(ARGV[6 + 3 * i], MAXN)
  if not is_hex(hex) or ds == nil or df == nil then return redis.error_reply('ERR tool-health: bad arguments') end
  local base = P .. 'r:' .. hex .. ':' .. S(width) .. ':'
  if ds > 0 or df > 0 then
    local k = base .. S(cur)
    local t = ktype(k)
    local ok = t == 'none'
    if t == 'hash' then
      local v = redis.call('HMGET', k, 's', 'f')
      ok = redis.call('HLEN', k) <= 2 and (v[1] == false or int(v[1], MAXN) ~= nil)
        and (v[2] == false or int(v[2], MAXN) ~= nil)
    end
    if not ok then redis.call('DEL', k) corrupt = corrupt + 1 end
    if ds > 0 then redis.call('HINCRBY', k, 's', ds) end
    if df > 0 then redis.call('HINCRBY', k, 'f', df) end
    redis.call('PEXPIRE', k, width * 10)
  end
  local ts, tf = 0, 0
  for b = cur - 8, cur do
    local kb = base .. S(b)
    local t = ktype(kb)
    if t == 'hash' then
      local v = redis.call('HMGET', kb, 's', 'f')
      local a, c = 0, 0
      if v[1] then a = int(v[1], MAXN) end
      if v[2] then c = int(v[2], MAXN) end
      if a == nil or c == nil then corrupt = corrupt + 1 else ts = ts + a tf = tf + c end
    elseif t ~= 'none' then
      corrupt = corrupt + 1
    end
  end
  out[#out + 1] = hex
  -- Buckets each in range whose sum is not: this tool's window cannot be trusted ('-', which
  -- the client skips and counts); the other tools of the batch are answered as usual.
  if ts > MAXN or tf > MAXN then
    out[#out + 1] = '-'
    out[#out + 1] = '-'
  else
    out[#out + 1] = S(ts)
    out[#out + 1] = S(tf)
  end
end
out[2] = S(corrupt)
return out
