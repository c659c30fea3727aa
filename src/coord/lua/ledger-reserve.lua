-- KEYS: the ledgers. ARGV: now, prefix, id, points, holder, resTtlMs, snapshotKey, then 6 per ledger.
-- Returns [ok, refusedIndex, committed, cap, snapCap, snapReserved, snapSpent].
local id, points, holder, resTtl = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local ledgers = describe(KEYS, 8)
for _, l in ipairs(ledgers) do lapse(l.key) end
local function reply(ok, i, committed, cap)
  local t = totals(ARGV[7])
  return { ok, i, committed, cap, t[1], t[2], t[3] }
end
local existing = redis.call('GET', resKey(id))
if existing then
  local rec = cjson.decode(existing)
  -- Held already (this attempt reserved before); a lapsed or settled one is reserved anew.
  if rec.s == 'pending' or rec.s == 'sent' then return reply(1, 0, '', '') end
end
-- A hold of this holder's covers the points it reserves, as far as it goes: they were counted.
local mine = {}
for i, l in ipairs(ledgers) do
  local t = redis.call('HMGET', l.key, 'reserved', 'spent')
  local others, own = held(l.key, holder)
  local committed = num(t[1], 0) + num(t[2], 0) + others + own
  mine[i] = own
  if committed + points - math.min(points, own) > l.cap then return reply(0, i, fmt(committed), fmt(l.cap)) end
end
local keys = {}
for i, l in ipairs(ledgers) do
  if mine[i] > 0 then
    local left = mine[i] - math.min(points, mine[i])
    if left > 0 then redis.call('HSET', companion(l.key, 'holds'), holder, fmt(left))
    else redis.call('HDEL', companion(l.key, 'holds'), holder) end
  end
  redis.call('HINCRBYFLOAT', l.key, 'reserved', points)
  redis.call('HSET', companion(l.key, 'ids'), id, fmt(points))
  redis.call('HSET', companion(l.key, 'pending'), id, holder)
  keep(l.key)
  keys[i] = l.key
end
redis.call('SET', resKey(id), cjson.encode({ p = points, s = 'pending', h = holder, l = keys }), 'PX', resTtl)
return reply(1, 0, '', '')
