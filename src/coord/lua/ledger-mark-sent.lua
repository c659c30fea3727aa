-- KEYS: none. ARGV: now, prefix, id, holder. Returns 1, or 0 when the reservation is gone.
local id, holder = ARGV[3], ARGV[4]
-- A process whose lease lapsed (it stalled) sends nothing: its reservations may be lapsed or adopted.
if not holderAlive(holder) then return 0 end
local raw = redis.call('GET', resKey(id))
if not raw then return 0 end
local rec = cjson.decode(raw)
if rec.h ~= holder then return 0 end
if rec.s == 'pending' then
  rec.s = 'sent'
  rec.h = holder
  redis.call('SET', resKey(id), cjson.encode(rec), 'KEEPTTL')
  for _, lk in ipairs(rec.l) do redis.call('HDEL', companion(lk, 'pending'), id) end
  return 1
end
-- Lapsed (this process's lease ran out first) or settled: it must not be sent.
if rec.s == 'sent' then return 1 end
return 0
