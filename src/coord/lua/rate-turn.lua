-- A turn (ARGV[8] = "1": reserve the next send time) and/or a flush of accepted answers.
-- KEYS: state, accepted. ARGV: now, ceiling, fixed, initRps, initSettled, ttlMs, accepts, take.
-- Returns [delayMs, rps, settled, held, pausedForMs].
local delay = 0
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
