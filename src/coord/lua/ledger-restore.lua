-- After the coordinator lost its data: the spending a journal settled is counted again in the
-- ledger it went into, once (a `settled` tombstone marks each). KEYS: the ledger. ARGV: now,
-- prefix, resTtlMs, snapshotKey, 6 for the ledger, then id, spent pairs. Returns the count restored.
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
