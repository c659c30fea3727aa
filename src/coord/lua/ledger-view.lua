-- The budgets' books: lapses the never-sent reservations of dead processes, then reads each
-- ledger. KEYS: the ledgers. ARGV: now, prefix. Returns per ledger [key, fields..., open count].
local out = {}
for _, lk in ipairs(KEYS) do
  if redis.call('EXISTS', lk) == 1 then
    lapse(lk)
    sweep(lk)
    local h = redis.call('HGETALL', lk)
    local others = held(lk, '')
    out[#out + 1] = { lk, h, redis.call('HLEN', companion(lk, 'ids')), fmt(others) }
  end
end
return out
