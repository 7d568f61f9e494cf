-- index: KEYS boot, seq, open, ctls, strk; ARGV pub, channel, known ('<boot>:<seq>' the replica
-- read last, '-': none), max.
-- The first half of a poll: the shard's boot id and change counter, and — when they are not
-- the ones the replica knows — the tools listed open, under a control or with an open failure
-- streak (up to `max` of each; a member that is no tool is dropped). read.lua reads them.
-- Returns
-- {boot, seq, corrupt, 'same'} or {boot, seq, corrupt, 'list', hex...}.
local known, max = ARGV[3], int(ARGV[4], 100000)
if #KEYS ~= 5 or max == nil or type(known) ~= 'string' or #known > 40 then
  return redis.error_reply('ERR tool-health: bad arguments')
end
local bt = boot()
local sq = seq()
if known == bt .. ':' .. sq then return { bt, sq, S(corrupt), 'same' } end
local out, seen = { bt, sq, '0', 'list' }, {}
for i = 3, 5 do
  local k = KEYS[i]
  local t = ktype(k)
  if t == 'set' then
    for _, hex in ipairs(redis.call('SRANDMEMBER', k, max)) do
      if not is_hex(hex) then
        redis.call('SREM', k, hex) corrupt = corrupt + 1
      elseif not seen[hex] then
        seen[hex] = true
        out[#out + 1] = hex
      end
    end
  elseif t ~= 'none' then
    redis.call('DEL', k) corrupt = corrupt + 1
  end
end
out[3] = S(corrupt)
return out
