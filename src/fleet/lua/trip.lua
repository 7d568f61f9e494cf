-- trip: KEYS boot, seq, t (state), k (streak), strk, open, q (quorum);
-- ARGV pub, channel, hex, seen_ep, cooldown_ms, replica, quorum, quorum_window_ms.
-- A replica's breaker tripped. If the tool's shared episode is open and not older than the one
-- the replica knew, it joins that episode (racing trips make one); otherwise, once `quorum`
-- replicas tripped within the window, a new episode opens: the server's clock stamps it, and
-- every replica hears it. Returns {code, ep, remaining, cooldown, by, boot, corrupt} with code
-- 'join' | 'new' | 'vote' (ep = votes so far) | 'future'.
local TK, KK, STRK, OPEN, QK = KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local hex, seen, cd, me = ARGV[3], int(ARGV[4], MAXN), int(ARGV[5], MAXMS), ARGV[6]
local quorum, qwin = int(ARGV[7], 1000), int(ARGV[8], MAXMS)
if QK == nil or not is_hex(hex) or seen == nil or cd == nil or not is_id(me) or quorum == nil
  or qwin == nil then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local now = now_ms()
local bt = boot()
local s = read_state(TK)
if s == 'future' then return { 'future', '0', '0', '0', me, bt, S(corrupt) } end
if s == 'corrupt' then redis.call('DEL', TK) corrupt = corrupt + 1 s = nil end
if type(s) == 'table' and s.st == 'o' and s.ep >= seen then
  local f = state_fields(s, now)
  return { 'join', f[2], f[4], f[5], f[6], bt, S(corrupt) }
end
if quorum > 1 then
  local qt = ktype(QK)
  if qt ~= 'none' and (qt ~= 'zset' or redis.call('ZCARD', QK) > 10000) then
    redis.call('DEL', QK) corrupt = corrupt + 1
  elseif qt == 'zset' then
    -- Votes no replica casts (not an id, or dated more than a window ahead) are no votes.
    local m = redis.call('ZRANGE', QK, 0, -1, 'WITHSCORES')
    for i = 1, #m, 2 do
      if not is_id(m[i]) or tonumber(m[i + 1]) > now + qwin then
        redis.call('ZREM', QK, m[i]) corrupt = corrupt + 1
      end
    end
  end
  redis.call('ZADD', QK, now, me)
  redis.call('ZREMRANGEBYSCORE', QK, '-inf', '(' .. S(now - qwin))
  redis.call('PEXPIRE', QK, math.max(qwin, 1))
  local n = redis.call('ZCARD', QK)
  if n < quorum then return { 'vote', S(n), '0', '0', me, bt, S(corrupt) } end
  redis.call('DEL', QK)
end
local old = 0
if type(s) == 'table' then old = s.ep end
local ep = math.max(now, old + 1, seen + 1)
write_open(TK, KK, STRK, OPEN, hex, ep, now, cd, me)
publish('o', hex, S(ep), S(cd), S(cd), '0', '0', me, bt)
return { 'new', S(ep), S(cd), S(cd), me, bt, S(corrupt) }
