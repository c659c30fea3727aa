-- KEYS: lock. ARGV: value. Deletes the lock only if it is still this acquisition's.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
