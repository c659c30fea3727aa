-- KEYS: the spec's ledgers (where a missing reservation is made again). ARGV: now, prefix, id, to,
-- holder, resTtlMs, snapshotKey, then 6 per ledger. Returns [within, snap...].
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
