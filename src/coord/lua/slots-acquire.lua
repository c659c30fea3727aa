-- Takes a slot if fewer than `cap` are held, first dropping those of holders whose lease is gone.
-- KEYS: slots. ARGV: now, cap, member, holderKeyPrefix, ttlMs. Returns [taken, held].
local now = clock(ARGV[1])
local cap = tonumber(ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
if n >= cap then
  local alive = {}
  for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local h = string.match(m, '^(.*)|[^|]*$')
    if h then
      if alive[h] == nil then alive[h] = redis.call('EXISTS', ARGV[4] .. h) == 1 end
      if not alive[h] then
        redis.call('ZREM', KEYS[1], m)
        n = n - 1
      end
    end
  end
end
if n < cap then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return { 1, n + 1 }
end
return { 0, n }
