-- KEYS: none. ARGV: now, prefix, id, spent, snapshotKey. The record stays as a tombstone (state
-- settled) for its remaining time, so that a second settle, or an adopt of an attempt whose
-- settlement never reached the journal, changes nothing. Returns [settledNow, snap...].
local id, spent = ARGV[3], tonumber(ARGV[4])
local raw = redis.call('GET', resKey(id))
local done = 0
if raw then
  local rec = cjson.decode(raw)
  if rec.s == 'pending' or rec.s == 'sent' then
    unreserve(id, rec, spent)
    redis.call('SET', resKey(id), '{"s":"settled"}', 'KEEPTTL')
    done = 1
  end
end
local t = totals(ARGV[5])
return { done, t[1], t[2], t[3] }
