-- Ledgers. Each ledger is a hash `…ledger:REST` (cap, reserved, spent, kind, name, period,
-- periodId, ttl) with two companions: `…ledger-ids:REST` (reservation id → points) and
-- `…ledger-pending:REST` (id → holder, for reservations whose create may not have left yet). A
-- reservation's own record `…res:ID` says its points, state, holder and ledgers, so it is settled
-- in the ledgers it was made in, whoever settles it and whenever. ARGV[2] is the account's prefix.
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
