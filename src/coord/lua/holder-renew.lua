-- The holder's heartbeat: renews its lease and the expiry of the shared keys it uses. KEYS: holder,
-- then keys to keep. ARGV: leaseMs, then each kept key's time to live. 0 when the lease was gone:
-- this process was given up.
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return 0 end
for i = 2, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[i]) end
return 1
