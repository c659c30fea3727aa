-- The shared rate's state and RateController's rules over it (KEYS[1] state, KEYS[2] accepted).
-- R is the table of the rules' constants (RATE_RULES of src/coord/scripts.ts, which puts it first).
local NEVER = -1e15
local function clamp(v, lo, hi) return math.min(hi, math.max(lo, v)) end

local function fresh(now, ceiling, fixed)
  local s = { rps = R.safeStartRps, slowStart = 1, settled = 0, held = 0, changedAt = now,
    limitedAt = NEVER, pausedUntil = 0, tat = 0, firstSentAt = 0, pauses = '[]' }
  if fixed then s.rps = ceiling; s.slowStart = 0 end
  s.rps = clamp(s.rps, R.minRps, ceiling)
  return s
end

-- A remembered rate: where the last run on this account ended (RateController.resume).
local function seed(s, rps, settled, now, ceiling)
  s.rps = clamp(rps, R.minRps, ceiling)
  s.changedAt = now
  s.settled = settled
  if settled == 1 then s.slowStart = 0; s.limitedAt = now; s.held = s.rps else s.slowStart = 1 end
end

local NUMERIC = { 'rps', 'slowStart', 'settled', 'held', 'changedAt', 'limitedAt', 'pausedUntil', 'tat', 'firstSentAt' }

local function load(key, now, ceiling, fixed, initRps, initSettled)
  local h = redis.call('HGETALL', key)
  local s
  if #h == 0 then
    s = fresh(now, ceiling, fixed)
    if initRps and not fixed then seed(s, initRps, initSettled, now, ceiling) end
  else
    s = {}
    for i = 1, #h, 2 do s[h[i]] = h[i + 1] end
    for _, f in ipairs(NUMERIC) do s[f] = num(s[f], 0) end
    if s.pauses == nil then s.pauses = '[]' end
    -- A pause no longer than any process now sets, whoever stored it (a process from before the cap,
    -- a hand-edited key): the key's expiry is renewed on every call, so it would never lapse. The
    -- next free moment likewise: each process holds one reservation at a time, 5 s at the slowest.
    s.pausedUntil = math.min(s.pausedUntil, now + R.maxPauseMs)
    s.tat = math.min(s.tat, math.max(now, s.pausedUntil) + R.maxPauseMs)
  end
  if fixed then s.rps = ceiling; s.slowStart = 0 end
  s.rps = clamp(s.rps, R.minRps, ceiling)
  return s
end

local function save(key, s, ttl)
  local args = {}
  for _, f in ipairs(NUMERIC) do
    args[#args + 1] = f
    args[#args + 1] = fmt(s[f])
  end
  args[#args + 1] = 'pauses'
  args[#args + 1] = s.pauses
  redis.call('HSET', key, unpack(args))
  redis.call('PEXPIRE', key, ttl)
end

local function set(s, rps, now, ceiling)
  s.rps = clamp(rps, R.minRps, ceiling)
  s.changedAt = now
end

-- "age:count,age:count": answers that came that many ms ago, by the caller's clock.
local function record(key, now, spec, ttl)
  if spec == nil or spec == '' then return end
  for age, count in string.gmatch(spec, '([%d.]+):(%d+)') do
    local at = now - tonumber(age)
    redis.call('HINCRBY', key, tostring(math.floor(at / R.bucketMs)), tonumber(count))
  end
  -- Pruned when it holds two windows' worth: a call costs O(1) but once in a while.
  if redis.call('HLEN', key) > 2 * R.windowMs / R.bucketMs then
    local oldest = math.floor((now - R.windowMs) / R.bucketMs) - 1
    for _, b in ipairs(redis.call('HKEYS', key)) do
      if tonumber(b) < oldest then redis.call('HDEL', key, b) end
    end
  end
  redis.call('PEXPIRE', key, ttl)
end

local function pausedBetween(s, from, to)
  local paused = 0
  for _, p in ipairs(cjson.decode(s.pauses)) do
    paused = paused + math.max(0, math.min(p[2], to) - math.max(p[1], from))
  end
  return paused
end

-- Accepted answers per second over the window, since the last cut, leaving out paused time.
local function sustained(s, now, acceptedKey, least)
  local first = s.firstSentAt
  if first <= 0 then first = now end
  local from = math.max(now - R.windowMs, first, s.limitedAt)
  local fromBucket = math.floor(from / R.bucketMs)
  -- The last moments are left out: other processes' answers of then may not have been told yet,
  -- and a count missing them reads low.
  local toBucket = math.floor((now - R.reportLagMs) / R.bucketMs)
  local h = redis.call('HGETALL', acceptedKey)
  local n, lo, hi = 0, nil, nil
  for i = 1, #h, 2 do
    local b = tonumber(h[i])
    if b >= fromBucket and b <= toBucket then
      n = n + tonumber(h[i + 1])
      if lo == nil or b < lo then lo = b end
      if hi == nil or b > hi then hi = b end
    end
  end
  if n < (least or 4) or lo == nil then return nil end
  -- From the spread of the answers, not their count over the window (as RateController does).
  local span = (hi - lo) * R.bucketMs - pausedBetween(s, lo * R.bucketMs, hi * R.bucketMs)
  if span <= 0 then return nil end
  return (n - 1) / (span / 1000)
end

local function settleAt(s, now, acceptedKey)
  local sus = sustained(s, now, acceptedKey)
  if s.settled == 1 and s.held > 0 and s.rps > s.held then
    if sus then return math.min(s.held, sus * R.margin) end
    return s.held
  end
  if sus and sus < s.rps then return sus * R.margin end
  -- At a rate an earlier 429 of this run set, the service's bucket stayed near empty: what it
  -- accepted is what it sustains, just over its limit, not a reason for a blind cut
  -- (RateController.settleAt). Not for a rate remembered from the last run (limitedAt is its seed).
  if s.slowStart ~= 1 and s.settled == 1 and sus and s.firstSentAt > 0 and s.limitedAt > s.firstSentAt then
    return s.rps * R.margin
  end
  return s.rps * R.plainCut
end

-- A turn was given while the rate binds (the turn had to wait): slow start doubles, a settled
-- rate waits out its hold and then probes upward.
local function busy(s, now, ceiling, fixed)
  if fixed or s.rps >= ceiling or now < s.pausedUntil then return end
  if s.slowStart == 1 then
    if now - s.changedAt >= R.doublingMs then set(s, s.rps * 2, now, ceiling) end
    return
  end
  if now - s.limitedAt < R.holdMs then return end
  local base = s.held
  if base <= 0 then base = s.rps end
  local cap = base * R.probeSpan
  if s.rps < cap and now - s.changedAt >= R.probeMs then
    set(s, math.min(cap, s.rps + math.max(0.1, s.rps * 0.05)), now, ceiling)
  elseif s.rps >= cap and now - s.changedAt >= R.confirmMs then
    s.held = s.rps
    set(s, s.rps, now, ceiling)
  end
end

local function answer(s, now, delay)
  return { fmt(delay), fmt(s.rps), s.settled, fmt(s.held), fmt(math.max(0, s.pausedUntil - now)) }
end
