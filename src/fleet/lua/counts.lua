-- counts: KEYS boot, seq, r_1 .. r_n (each tool's counts for this width);
-- ARGV pub, channel, width_ms, n, (hex, successes, failures) * n.
-- Adds each replica's new counts (sent once, never again) to the tool's time bucket by server
-- time, and answers the fleet's window per tool: the current bucket and the 8 before it, as
-- the local window counts. A tool's buckets are fields of one hash (`s<bucket>`, `f<bucket>`,
-- bucket = server ms / width), older ones dropped as it is written; the hash expires 10 widths
-- after its last write. Returns {boot, corrupt, (hex, successes, failures) * n}; a tool whose
-- window sums past the bound of every stored integer is answered ('-', '-').
local width, n = int(ARGV[3], MAXMS), int(ARGV[4], 10000)
if width == nil or width == 0 or n == nil or #KEYS ~= n + 2 then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local cur = math.floor(now / width)
local out = { bt, '0' }
for i = 1, n do
  local k = KEYS[2 + i]
  local hex, ds, df = ARGV[2 + 3 * i], int(ARGV[3 + 3 * i], MAXN), int(ARGV[4 + 3 * i], MAXN)
  if not is_hex(hex) or ds == nil or df == nil then return redis.error_reply('ERR tool-health: bad arguments') end
  local t = ktype(k)
  if t ~= 'none' and (t ~= 'hash' or redis.call('HLEN', k) > 64) then
    redis.call('DEL', k) corrupt = corrupt + 1 t = 'none'
  end
  local ts, tf = 0, 0
  if t == 'hash' then
    local all = redis.call('HGETALL', k)
    for j = 1, #all, 2 do
      local f, v = all[j], all[j + 1]
      local kind, b = string.sub(f, 1, 1), int(string.sub(f, 2), MAXN)
      local c = int(v, MAXN)
      if (kind ~= 's' and kind ~= 'f') or b == nil or c == nil or b > cur + 8 then
        -- No field a replica writes (buckets come from the servers' clocks: after a failover
        -- the new primary's may be a little behind, never a window ahead).
        redis.call('HDEL', k, f) corrupt = corrupt + 1
      elseif b < cur - 8 then
        redis.call('HDEL', k, f)
      elseif b > cur then
        -- A bucket of a clock a little ahead: counted when this one gets there.
      elseif kind == 's' then
        ts = ts + c
      else
        tf = tf + c
      end
    end
  end
  if ds > 0 or df > 0 then
    if ds > 0 then redis.call('HINCRBY', k, 's' .. S(cur), ds) ts = ts + ds end
    if df > 0 then redis.call('HINCRBY', k, 'f' .. S(cur), df) tf = tf + df end
    redis.call('PEXPIRE', k, width * 10)
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
