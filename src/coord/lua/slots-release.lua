-- KEYS: slots. ARGV: member, channel. Tells the waiting processes only when a slot was freed.
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 then redis.call('PUBLISH', ARGV[2], '1') end
return removed
