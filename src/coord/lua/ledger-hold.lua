-- KEYS: one ledger. ARGV: now, prefix, holder, points, then the ledger's 6 description values.
-- Holds `points` ahead for `holder` (replacing its hold) when they fit beside what is reserved,
-- spent and held by others; points 0 lets go. Returns [ok, committed without this hold].
local holder, points = ARGV[3], tonumber(ARGV[4])
local l = describe(KEYS, 5)[1]
lapse(l.key)
local t = redis.call('HMGET', l.key, 'reserved', 'spent')
local others = held(l.key, holder)
local committed = num(t[1], 0) + num(t[2], 0) + others
if points > 0 and committed + points > l.cap then return { 0, fmt(committed) } end
if points > 0 then redis.call('HSET', companion(l.key, 'holds'), holder, fmt(points))
else redis.call('HDEL', companion(l.key, 'holds'), holder) end
keep(l.key)
return { 1, fmt(committed) }
