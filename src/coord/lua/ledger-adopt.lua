-- Describes the ledgers and takes over the reservations of attempts an earlier process left open.
-- KEYS: the ledgers. ARGV: now, prefix, holder, resTtlMs, snapshotKey, 6 per ledger, then id,
-- points pairs. Returns [kept, restored, snap...].
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
