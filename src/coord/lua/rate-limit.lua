-- A 429 (RateController.limit). KEYS: state, accepted. ARGV: now, ceiling, fixed, initRps,
-- initSettled, ttlMs, accepts, retryAfterMs (empty: none given), sentAgoMs.
local wait = math.min(num(ARGV[8], 1000), R.maxPauseMs)
local sentAt = now - num(ARGV[9], 0)
local pauses = cjson.decode(s.pauses)
if wait > R.longRetryAfterMs and now + wait > s.pausedUntil then
  pauses[#pauses + 1] = { math.max(now, s.pausedUntil), now + wait }
  s.pausedUntil = now + wait
end
local kept = {}
for _, p in ipairs(pauses) do
  if p[2] >= now - R.windowMs then kept[#kept + 1] = p end
end
if #kept == 0 then s.pauses = '[]' else s.pauses = cjson.encode(kept) end
-- 429s of requests sent before the last cut, or just after it, are its echo.
if sentAt >= s.limitedAt + R.cutGraceMs then
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
  local since = sustained(s, now, KEYS[2], R.recutAnswers)
  if since and since < s.rps * R.recutBelow then
    s.limitedAt = now
    set(s, since, now, ceiling)
    s.held = s.rps
  end
end
save(KEYS[1], s, ttl)
return answer(s, now, 0)
