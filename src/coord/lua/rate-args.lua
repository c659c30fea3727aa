-- The shared arguments of a turn and a 429: the state loaded, the accepted answers recorded.
local now = clock(ARGV[1])
local ceiling = tonumber(ARGV[2])
local fixed = ARGV[3] == '1'
local ttl = tonumber(ARGV[6])
local s = load(KEYS[1], now, ceiling, fixed, tonumber(ARGV[4]), num(ARGV[5], 0))
record(KEYS[2], now, ARGV[7], ttl)
