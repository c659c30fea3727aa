-- KEYS: lock, fence. ARGV: record (JSON without fence), leaseMs, holderKeyPrefix, breakLock, fenceTtlMs.
-- Returns [1, fence, value, replaced] or [0, current value, pttl].
local current = redis.call('GET', KEYS[1])
local replaced = ''
if current then
  local ok, rec = pcall(cjson.decode, current)
  local h = ok and type(rec) == 'table' and rec.holder or nil
  local alive = type(h) == 'string' and redis.call('EXISTS', ARGV[3] .. h) == 1
  if alive and ARGV[4] ~= '1' then return { 0, current, redis.call('PTTL', KEYS[1]) } end
  replaced = current
end
local fence = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
local rec = cjson.decode(ARGV[1])
rec.fence = fence
local value = cjson.encode(rec)
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return { 1, fence, value, replaced }
