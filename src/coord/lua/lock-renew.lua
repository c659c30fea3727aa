-- KEYS: lock. ARGV: value, leaseMs. Returns [1] while ours, else [0, current value or false].
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return { 1 }
end
return { 0, current }
