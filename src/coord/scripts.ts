// The Lua scripts: every read-modify-write of the coordinator is one script, so it is atomic
// however many processes call at once. Time comes from the server's clock (`TIME`), which every
// process shares whatever its own clock says; ARGV[1] overrides it in tests (empty: the server's).
// Times from the caller's clock travel as ages ("this long ago"), never as instants.
import { RATE_RULES as ENGINE_RATE_RULES } from "../engine/rate.js";

/** RateController's rules (src/engine/rate.ts), as the shared rate applies them. */
export const RATE_RULES = {
  ...ENGINE_RATE_RULES,
  /** Accepted answers are counted per this many ms of server time (the callers group ages by 10 ms). */
  bucketMs: 10,
  /** Every process tells its accepted answers within this long (src/coord/shared-rate.ts FLUSH_MS, and a round trip). */
  reportLagMs: 40,
} as const;

const PRELUDE = `
local function clock(arg)
  local n = tonumber(arg)
  if n then return n end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local function num(v, default)
  local n = tonumber(v)
  if n == nil then return default end
  return n
end
local function fmt(x) return string.format('%.17g', x) end
`;

const R = RATE_RULES;

/** The shared rate's state and RateController's rules over it (KEYS[1] state, KEYS[2] accepted). */
const RATE_LIB = `
local NEVER = -1e15
local function clamp(v, lo, hi) return math.min(hi, math.max(lo, v)) end

local function fresh(now, ceiling, fixed)
  local s = { rps = ${R.safeStartRps}, slowStart = 1, settled = 0, held = 0, changedAt = now,
    limitedAt = NEVER, pausedUntil = 0, tat = 0, firstSentAt = 0, pauses = '[]' }
  if fixed then s.rps = ceiling; s.slowStart = 0 end
  s.rps = clamp(s.rps, ${R.minRps}, ceiling)
  return s
end

-- A remembered rate: where the last run on this account ended (RateController.resume).
local function seed(s, rps, settled, now, ceiling)
  s.rps = clamp(rps, ${R.minRps}, ceiling)
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
    s.pausedUntil = math.min(s.pausedUntil, now + ${R.maxPauseMs})
    s.tat = math.min(s.tat, math.max(now, s.pausedUntil) + ${R.maxPauseMs})
  end
  if fixed then s.rps = ceiling; s.slowStart = 0 end
  s.rps = clamp(s.rps, ${R.minRps}, ceiling)
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
  s.rps = clamp(rps, ${R.minRps}, ceiling)
  s.changedAt = now
end

-- "age:count,age:count": answers that came that many ms ago, by the caller's clock.
local function record(key, now, spec, ttl)
  if spec == nil or spec == '' then return end
  for age, count in string.gmatch(spec, '([%d.]+):(%d+)') do
    local at = now - tonumber(age)
    redis.call('HINCRBY', key, tostring(math.floor(at / ${R.bucketMs})), tonumber(count))
  end
  -- Pruned when it holds two windows' worth: a call costs O(1) but once in a while.
  if redis.call('HLEN', key) > 2 * ${R.windowMs} / ${R.bucketMs} then
    local oldest = math.floor((now - ${R.windowMs}) / ${R.bucketMs}) - 1
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
  local from = math.max(now - ${R.windowMs}, first, s.limitedAt)
  local fromBucket = math.floor(from / ${R.bucketMs})
  -- The last moments are left out: other processes' answers of then may not have been told yet,
  -- and a count missing them reads low.
  local toBucket = math.floor((now - ${R.reportLagMs}) / ${R.bucketMs})
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
  local span = (hi - lo) * ${R.bucketMs} - pausedBetween(s, lo * ${R.bucketMs}, hi * ${R.bucketMs})
  if span <= 0 then return nil end
  return (n - 1) / (span / 1000)
end

local function settleAt(s, now, acceptedKey)
  local sus = sustained(s, now, acceptedKey)
  if s.settled == 1 and s.held > 0 and s.rps > s.held then
    if sus then return math.min(s.held, sus * ${R.margin}) end
    return s.held
  end
  if sus and sus < s.rps then return sus * ${R.margin} end
  return s.rps * ${R.plainCut}
end

-- A turn was given while the rate binds (the turn had to wait): slow start doubles, a settled
-- rate waits out its hold and then probes upward.
local function busy(s, now, ceiling, fixed)
  if fixed or s.rps >= ceiling or now < s.pausedUntil then return end
  if s.slowStart == 1 then
    if now - s.changedAt >= ${R.doublingMs} then set(s, s.rps * 2, now, ceiling) end
    return
  end
  if now - s.limitedAt < ${R.holdMs} then return end
  local base = s.held
  if base <= 0 then base = s.rps end
  local cap = base * ${R.probeSpan}
  if s.rps < cap and now - s.changedAt >= ${R.probeMs} then
    set(s, math.min(cap, s.rps + math.max(0.1, s.rps * 0.05)), now, ceiling)
  elseif s.rps >= cap and now - s.changedAt >= ${R.confirmMs} then
    s.held = s.rps
    set(s, s.rps, now, ceiling)
  end
end

local function answer(s, now, delay)
  return { fmt(delay), fmt(s.rps), s.settled, fmt(s.held), fmt(math.max(0, s.pausedUntil - now)) }
end
`;

/** The shared arguments of a turn and a 429: the state loaded, the accepted answers recorded. */
const RATE_HEAD = `
local now = clock(ARGV[1])
local ceiling = tonumber(ARGV[2])
local fixed = ARGV[3] == '1'
local ttl = tonumber(ARGV[6])
local s = load(KEYS[1], now, ceiling, fixed, tonumber(ARGV[4]), num(ARGV[5], 0))
record(KEYS[2], now, ARGV[7], ttl)
`;

/**
 * A turn (ARGV[8] = "1": reserve the next send time) and/or a flush of accepted answers.
 * KEYS: state, accepted. ARGV: now, ceiling, fixed, initRps, initSettled, ttlMs, accepts, take.
 * Returns [delayMs, rps, settled, held, pausedForMs].
 */
export const RATE_TURN = `${PRELUDE}${RATE_LIB}${RATE_HEAD}local delay = 0
if ARGV[8] == '1' then
  -- GCRA: the next free moment, never before now (no credit for idle time) nor in a pause.
  local start = math.max(s.tat, now, s.pausedUntil)
  s.tat = start + 1000 / s.rps
  if s.firstSentAt <= 0 then s.firstSentAt = now end
  if start > now then busy(s, now, ceiling, fixed) end
  delay = start - now
end
save(KEYS[1], s, ttl)
return answer(s, now, delay)
`;

/**
 * A 429 (RateController.limit). KEYS: state, accepted. ARGV: now, ceiling, fixed, initRps,
 * initSettled, ttlMs, accepts, retryAfterMs (empty: none given), sentAgoMs.
 */
export const RATE_LIMIT = `${PRELUDE}${RATE_LIB}${RATE_HEAD}local wait = math.min(num(ARGV[8], 1000), ${R.maxPauseMs})
local sentAt = now - num(ARGV[9], 0)
local pauses = cjson.decode(s.pauses)
if wait > ${R.longRetryAfterMs} and now + wait > s.pausedUntil then
  pauses[#pauses + 1] = { math.max(now, s.pausedUntil), now + wait }
  s.pausedUntil = now + wait
end
local kept = {}
for _, p in ipairs(pauses) do
  if p[2] >= now - ${R.windowMs} then kept[#kept + 1] = p end
end
if #kept == 0 then s.pauses = '[]' else s.pauses = cjson.encode(kept) end
-- 429s of requests sent before the last cut, or just after it, are its echo.
if sentAt >= s.limitedAt + ${R.cutGraceMs} then
  local target = settleAt(s, now, KEYS[2])
  s.limitedAt = now
  s.slowStart = 0
  if not fixed then
    set(s, target, now, ceiling)
    s.settled = 1
    s.held = s.rps
  end
elseif sentAt >= s.limitedAt and not fixed then
  -- RateController.recut: after a cut the service's bucket is empty, so what it accepted since is
  -- its rate; clearly below the rate now, the cut was not enough.
  local since = sustained(s, now, KEYS[2], ${R.recutAnswers})
  if since and since < s.rps * ${R.recutBelow} then
    s.limitedAt = now
    set(s, since, now, ceiling)
    s.held = s.rps
  end
end
save(KEYS[1], s, ttl)
return answer(s, now, 0)
`;

/**
 * Takes a slot if fewer than `cap` are held, first dropping those of holders whose lease is gone.
 * KEYS: slots. ARGV: now, cap, member, holderKeyPrefix, ttlMs. Returns [taken, held].
 */
export const SLOTS_ACQUIRE = `${PRELUDE}
local now = clock(ARGV[1])
local cap = tonumber(ARGV[2])
local n = redis.call('ZCARD', KEYS[1])
if n >= cap then
  local alive = {}
  for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
    local h = string.match(m, '^(.*)|[^|]*$')
    if h then
      if alive[h] == nil then alive[h] = redis.call('EXISTS', ARGV[4] .. h) == 1 end
      if not alive[h] then
        redis.call('ZREM', KEYS[1], m)
        n = n - 1
      end
    end
  end
end
if n < cap then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return { 1, n + 1 }
end
return { 0, n }
`;

/** KEYS: slots. ARGV: member, channel. Tells the waiting processes only when a slot was freed. */
export const SLOTS_RELEASE = `
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if removed == 1 then redis.call('PUBLISH', ARGV[2], '1') end
return removed
`;

/**
 * The holder's heartbeat: renews its lease and the expiry of the shared keys it uses. KEYS: holder,
 * then keys to keep. ARGV: leaseMs, then each kept key's time to live. 0 when the lease was gone:
 * this process was given up.
 */
export const HOLDER_RENEW = `
if redis.call('PEXPIRE', KEYS[1], ARGV[1]) == 0 then return 0 end
for i = 2, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[i]) end
return 1
`;

/**
 * KEYS: lock, fence. ARGV: record (JSON without fence), leaseMs, holderKeyPrefix, breakLock, fenceTtlMs.
 * Returns [1, fence, value, replaced] or [0, current value, pttl].
 */
export const LOCK_ACQUIRE = `
local current = redis.call('GET', KEYS[1])
local replaced = ''
if current then
  local ok, rec = pcall(cjson.decode, current)
  local h = ok and type(rec) == 'table' and rec.holder or nil
  local alive = type(h) == 'string' and redis.call('EXISTS', ARGV[3] .. h) == 1
  if alive and ARGV[4] ~= '1' then return { 0, current, redis.call('PTTL', KEYS[1]) } end
  replaced = current
end
local fence = redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
local rec = cjson.decode(ARGV[1])
rec.fence = fence
local value = cjson.encode(rec)
redis.call('SET', KEYS[1], value, 'PX', ARGV[2])
return { 1, fence, value, replaced }
`;

/** KEYS: lock. ARGV: value, leaseMs. Returns [1] while ours, else [0, current value or false]. */
export const LOCK_RENEW = `
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return { 1 }
end
return { 0, current }
`;

/** KEYS: lock. ARGV: value. Deletes the lock only if it is still this acquisition's. */
export const LOCK_RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

/**
 * Ledgers. Each ledger is a hash `…ledger:REST` (cap, reserved, spent, kind, name, period,
 * periodId, ttl) with two companions: `…ledger-ids:REST` (reservation id → points) and
 * `…ledger-pending:REST` (id → holder, for reservations whose create may not have left yet). A
 * reservation's own record `…res:ID` says its points, state, holder and ledgers, so it is settled
 * in the ledgers it was made in, whoever settles it and whenever. ARGV[2] is the account's prefix.
 */
const LEDGER_LIB = `
local P = ARGV[2]
local LEDGER = P .. 'ledger:'
local function companion(lk, kind) return P .. 'ledger-' .. kind .. ':' .. string.sub(lk, #LEDGER + 1) end
local function resKey(id) return P .. 'res:' .. id end
local alive = {}
local function holderAlive(h)
  if alive[h] == nil then alive[h] = redis.call('EXISTS', P .. 'holder:' .. h) == 1 end
  return alive[h]
end

local function keep(lk)
  local ttl = redis.call('HGET', lk, 'ttl')
  if ttl then
    redis.call('PEXPIRE', lk, ttl)
    redis.call('PEXPIRE', companion(lk, 'ids'), ttl)
    redis.call('PEXPIRE', companion(lk, 'pending'), ttl)
    redis.call('PEXPIRE', companion(lk, 'holds'), ttl)
  end
end

-- Points held ahead by admitted processes (a shard's whole estimate, holder -> points), turned into
-- reservations as the holder makes them. A dead holder's hold lapses. Returns others', own.
local function held(lk, own)
  local hk = companion(lk, 'holds')
  local h = redis.call('HGETALL', hk)
  local others, mine = 0, 0
  for i = 1, #h, 2 do
    if not holderAlive(h[i]) then
      redis.call('HDEL', hk, h[i])
    elseif h[i] == own then
      mine = tonumber(h[i + 1]) or 0
    else
      others = others + (tonumber(h[i + 1]) or 0)
    end
  end
  return others, mine
end

-- Takes reservation id out of its ledgers; spent goes into their totals.
local function unreserve(id, rec, spent)
  for _, lk in ipairs(rec.l) do
    if redis.call('EXISTS', lk) == 1 then
      redis.call('HINCRBYFLOAT', lk, 'reserved', -rec.p)
      if spent ~= 0 then redis.call('HINCRBYFLOAT', lk, 'spent', spent) end
      keep(lk)
    end
    redis.call('HDEL', companion(lk, 'ids'), id)
    redis.call('HDEL', companion(lk, 'pending'), id)
  end
end

-- Reservations still pending whose holder's lease is gone: their create never left. Lapsed.
local function lapse(lk)
  local pk = companion(lk, 'pending')
  local pending = redis.call('HGETALL', pk)
  for i = 1, #pending, 2 do
    local id, h = pending[i], pending[i + 1]
    if not holderAlive(h) then
      local raw = redis.call('GET', resKey(id))
      local rec = raw and cjson.decode(raw)
      if rec and rec.s == 'pending' then
        unreserve(id, rec, 0)
        -- A tombstone: this attempt's create was never sent (a process sends only once marked).
        redis.call('SET', resKey(id), '{"s":"lapsed"}', 'KEEPTTL')
      elseif not rec then
        local p = tonumber(redis.call('HGET', companion(lk, 'ids'), id))
        if p and redis.call('EXISTS', lk) == 1 then redis.call('HINCRBYFLOAT', lk, 'reserved', -p) end
        redis.call('HDEL', companion(lk, 'ids'), id)
        redis.call('HDEL', pk, id)
      else
        redis.call('HDEL', pk, id)
      end
    end
  end
end

-- Reservations whose record is gone (expired with its time to live): their points leave the
-- ledger. O(reservations): run by adopt and by the books, never by a reserve.
local function sweep(lk)
  local ik = companion(lk, 'ids')
  local ids = redis.call('HGETALL', ik)
  for i = 1, #ids, 2 do
    local id, p = ids[i], tonumber(ids[i + 1])
    if redis.call('EXISTS', resKey(id)) == 0 then
      if p and redis.call('EXISTS', lk) == 1 then redis.call('HINCRBYFLOAT', lk, 'reserved', -p) end
      redis.call('HDEL', ik, id)
      redis.call('HDEL', companion(lk, 'pending'), id)
    end
  end
end

-- ARGV from 'at' on: per ledger, cap, ttl, kind, name, period, periodId (6 each), n ledgers.
local function describe(keys, at)
  local ledgers = {}
  for i, lk in ipairs(keys) do
    local b = at + (i - 1) * 6
    local l = { key = lk, cap = tonumber(ARGV[b]), ttl = ARGV[b + 1] }
    redis.call('HSET', lk, 'cap', ARGV[b], 'ttl', ARGV[b + 1], 'kind', ARGV[b + 2], 'name', ARGV[b + 3],
      'period', ARGV[b + 4], 'periodId', ARGV[b + 5])
    redis.call('HSETNX', lk, 'reserved', '0')
    redis.call('HSETNX', lk, 'spent', '0')
    keep(lk)
    ledgers[i] = l
  end
  return ledgers
end

local function totals(lk)
  if lk == '' then return { '', '', '' } end
  local t = redis.call('HMGET', lk, 'cap', 'reserved', 'spent')
  return { t[1] or '', t[2] or '0', t[3] or '0' }
end

local function within(rec)
  local ok = 1
  for _, lk in ipairs(rec.l) do
    local t = redis.call('HMGET', lk, 'cap', 'reserved', 'spent')
    if t[1] and num(t[2], 0) + num(t[3], 0) + held(lk, '') > num(t[1], 0) then ok = 0 end
  end
  return ok
end

-- A reservation committed at the service already: made without a cap check.
local function commit(id, points, holder, ledgers, resTtl)
  local keys = {}
  for i, l in ipairs(ledgers) do
    redis.call('HINCRBYFLOAT', l.key, 'reserved', points)
    redis.call('HSET', companion(l.key, 'ids'), id, fmt(points))
    keep(l.key)
    keys[i] = l.key
  end
  redis.call('SET', resKey(id), cjson.encode({ p = points, s = 'sent', h = holder, l = keys }), 'PX', resTtl)
end
`;

/**
 * KEYS: the ledgers. ARGV: now, prefix, id, points, holder, resTtlMs, snapshotKey, then 6 per ledger.
 * Returns [ok, refusedIndex, committed, cap, snapCap, snapReserved, snapSpent].
 */
export const LEDGER_RESERVE = `${PRELUDE}${LEDGER_LIB}
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
`;

/** KEYS: none. ARGV: now, prefix, id, holder. Returns 1, or 0 when the reservation is gone. */
export const LEDGER_MARK_SENT = `${PRELUDE}${LEDGER_LIB}
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
`;

/**
 * KEYS: none. ARGV: now, prefix, id, spent, snapshotKey. The record stays as a tombstone (state
 * settled) for its remaining time, so that a second settle, or an adopt of an attempt whose
 * settlement never reached the journal, changes nothing. Returns [settledNow, snap...].
 */
export const LEDGER_SETTLE = `${PRELUDE}${LEDGER_LIB}
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
`;

/**
 * KEYS: the spec's ledgers (where a missing reservation is made again). ARGV: now, prefix, id, to,
 * holder, resTtlMs, snapshotKey, then 6 per ledger. Returns [within, snap...].
 */
export const LEDGER_ADJUST = `${PRELUDE}${LEDGER_LIB}
local id, to, holder, resTtl = ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6]
local raw = redis.call('GET', resKey(id))
local rec = raw and cjson.decode(raw)
if rec and rec.s == 'lapsed' then rec = nil end
if rec and rec.s ~= 'settled' then
  local delta = to - rec.p
  for _, lk in ipairs(rec.l) do
    if redis.call('EXISTS', lk) == 1 then
      redis.call('HINCRBYFLOAT', lk, 'reserved', delta)
      keep(lk)
    end
    if redis.call('HEXISTS', companion(lk, 'ids'), id) == 1 then redis.call('HSET', companion(lk, 'ids'), id, fmt(to)) end
  end
  rec.p = to
  redis.call('SET', resKey(id), cjson.encode(rec), 'KEEPTTL')
elseif not rec then
  -- Gone (the coordinator lost its data): the task exists at the service, so it counts again.
  local ledgers = describe(KEYS, 8)
  commit(id, to, holder, ledgers, resTtl)
  rec = { l = KEYS }
end
local ok = 1
if rec and rec.l then ok = within(rec) end
local t = totals(ARGV[7])
return { ok, t[1], t[2], t[3] }
`;

/**
 * Describes the ledgers and takes over the reservations of attempts an earlier process left open.
 * KEYS: the ledgers. ARGV: now, prefix, holder, resTtlMs, snapshotKey, 6 per ledger, then id,
 * points pairs. Returns [kept, restored, snap...].
 */
export const LEDGER_ADOPT = `${PRELUDE}${LEDGER_LIB}
local holder, resTtl = ARGV[3], ARGV[4]
local ledgers = describe(KEYS, 6)
for _, l in ipairs(ledgers) do
  lapse(l.key)
  sweep(l.key)
end
local kept, restored, reserved = 0, 0, 0
local withdraw = {}
local function fits(points)
  for _, l in ipairs(ledgers) do
    local t = redis.call('HMGET', l.key, 'reserved', 'spent')
    if num(t[1], 0) + num(t[2], 0) + points > l.cap then return false end
  end
  return true
end
for i = 6 + #KEYS * 6, #ARGV, 2 do
  local id, points = ARGV[i], tonumber(ARGV[i + 1])
  local raw = redis.call('GET', resKey(id))
  local rec = raw and cjson.decode(raw)
  if rec and (rec.s == 'pending' or rec.s == 'sent') then
    rec.s = 'sent'
    rec.h = holder
    redis.call('SET', resKey(id), cjson.encode(rec), 'KEEPTTL')
    for _, lk in ipairs(rec.l) do redis.call('HDEL', companion(lk, 'pending'), id) end
    kept = kept + 1
  elseif rec and rec.s == 'lapsed' then
    -- Its create was never sent: reserved again like any new one, or withdrawn if it no longer fits.
    if fits(points) then
      commit(id, points, holder, ledgers, resTtl)
      reserved = reserved + 1
    else
      withdraw[#withdraw + 1] = id
    end
  elseif not rec and #ledgers > 0 then
    -- Unknown here (the coordinator lost its data): the task may exist, so its points count again.
    commit(id, points, holder, ledgers, resTtl)
    restored = restored + 1
  end
end
local t = totals(ARGV[5])
return { kept, restored, reserved, t[1], t[2], t[3], withdraw }
`;

/**
 * After the coordinator lost its data: the spending a journal settled is counted again in the
 * ledger it went into, once (a `settled` tombstone marks each). KEYS: the ledger. ARGV: now,
 * prefix, resTtlMs, snapshotKey, 6 for the ledger, then id, spent pairs. Returns the count restored.
 */
export const LEDGER_RESTORE = `${PRELUDE}${LEDGER_LIB}
local resTtl = ARGV[3]
local ledgers = describe(KEYS, 5)
local n = 0
for i = 11, #ARGV, 2 do
  local id, spent = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('EXISTS', resKey(id)) == 0 then
    for _, l in ipairs(ledgers) do redis.call('HINCRBYFLOAT', l.key, 'spent', spent) end
    redis.call('SET', resKey(id), '{"s":"settled"}', 'PX', resTtl)
    n = n + 1
  end
end
return n
`;

/**
 * The budgets' books: lapses the never-sent reservations of dead processes, then reads each
 * ledger. KEYS: the ledgers. ARGV: now, prefix. Returns per ledger [key, fields..., open count].
 */
export const LEDGER_VIEW = `${PRELUDE}${LEDGER_LIB}
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
`;

/**
 * KEYS: one ledger. ARGV: now, prefix, holder, points, then the ledger's 6 description values.
 * Holds `points` ahead for `holder` (replacing its hold) when they fit beside what is reserved,
 * spent and held by others; points 0 lets go. Returns [ok, committed without this hold].
 */
export const LEDGER_HOLD = `${PRELUDE}${LEDGER_LIB}
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
`;

/** Every script by the name it is defined under (ioredis `defineCommand`: EVALSHA, EVAL on NOSCRIPT). */
export const SCRIPTS = {
  clapperRateTurn: RATE_TURN,
  clapperRateLimit: RATE_LIMIT,
  clapperSlotsAcquire: SLOTS_ACQUIRE,
  clapperSlotsRelease: SLOTS_RELEASE,
  clapperHolderRenew: HOLDER_RENEW,
  clapperLockAcquire: LOCK_ACQUIRE,
  clapperLockRenew: LOCK_RENEW,
  clapperLockRelease: LOCK_RELEASE,
  clapperLedgerReserve: LEDGER_RESERVE,
  clapperLedgerMarkSent: LEDGER_MARK_SENT,
  clapperLedgerSettle: LEDGER_SETTLE,
  clapperLedgerAdjust: LEDGER_ADJUST,
  clapperLedgerAdopt: LEDGER_ADOPT,
  clapperLedgerView: LEDGER_VIEW,
  clapperLedgerHold: LEDGER_HOLD,
  clapperLedgerRestore: LEDGER_RESTORE,
} as const;

export type ScriptName = keyof typeof SCRIPTS;
