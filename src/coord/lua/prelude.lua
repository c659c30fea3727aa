-- Before every script that reads the time or its arguments as numbers. Time comes from the server's
-- clock (`TIME`), which every process shares whatever its own clock says; ARGV[1] overrides it in
-- tests (empty: the server's). Times from the caller's clock travel as ages ("this long ago"),
-- never as instants.
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
