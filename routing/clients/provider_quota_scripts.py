"""The Lua script of the Redis provider-quota store (``routing.clients.provider_quota_store``) and how its replies
read.

One script, two operations, each atomic in Redis and on Redis's clock (``TIME``), so replicas with skewed
clocks share one minute:

* ``admit`` checks a target's provider rpm and tpm and counts the attempt in both or neither;
* ``settle`` replaces an attempt's token reservation with its real usage, and takes the attempt back whole
  (its request too) when it was never sent.

Two keys per target:

* ``…:req``, a sorted set: the request log, one member per admitted attempt scored by its admission time in
  ms. An attempt leaves it 60 s after its admission. Only admitted attempts are added, so it holds at most
  ``rpm`` members; trimming it removes each member once.
* ``…:tok``, a hash: tokens used and reserved per second of Redis's clock (``<second>``), their running sum
  (``s``) and the second below which no bucket is left (``o``). A second's bucket leaves 60 to 61 s after it,
  like the in-process window. Every operation touches at most the 61 buckets that can be in the window, whatever
  the history: an admission reads ``s`` and drops only the buckets that left since the last operation.
"""

from __future__ import annotations

from routing.clients.redis_client import Script

# ARGV[1] names the operation.
#
# "admit": KEYS: req, tok. ARGV: rpm, tpm (-1: none), then per call the attempt's member and its reservation
# (already capped at the tpm). Returns one string of comma-separated integers: Redis's time in ms, the verdict
# (0 admitted, 1 refused at the rpm, 2 refused at the tpm), ms until there may be room (0 when admitted), and
# the requests and tokens in the window after the decision.
#
# "settle": KEYS: req, tok. ARGV: per call the member, its admission second (Redis's clock), its reservation,
# the tokens it used, and 1 to take the request back too (never sent) or 0. Returns 1.
_PROVIDER_QUOTA = """
local window_ms = 60000

-- The tokens in the window at `second`: the running sum, once the buckets that left are dropped.
local function tokens_at(key, second)
  local head = redis.call('HMGET', key, 'o', 's')
  local low, sum = tonumber(head[1]), tonumber(head[2] or '0')
  local cutoff = second - 60
  if low == nil then return 0, cutoff end
  if low < cutoff then
    -- Every bucket lies in [low, low + 60]: only those below the cutoff go.
    local gone = {}
    for s = low, math.min(cutoff - 1, low + 60) do gone[#gone + 1] = tostring(s) end
    local values = redis.call('HMGET', key, unpack(gone))
    for i = 1, #values do
      if values[i] then sum = sum - tonumber(values[i]) end
    end
    redis.call('HDEL', key, unpack(gone))
    if sum < 0 then sum = 0 end
    redis.call('HSET', key, 'o', cutoff, 's', sum)
    low = cutoff
  end
  return sum, low
end

local function add_tokens(key, second, low, sum, amount)
  redis.call('HINCRBY', key, tostring(second), amount)
  redis.call('HSET', key, 'o', low, 's', sum + amount)
  redis.call('EXPIRE', key, 62)
end

-- When the tokens leave enough room for `need` more: the end of the first second whose leaving does it.
local function tokens_room_ms(key, second, sum, need, tpm, now)
  local fields = {}
  for s = second - 60, second do fields[#fields + 1] = tostring(s) end
  local values = redis.call('HMGET', key, unpack(fields))
  local left = sum
  for i = 1, #values do
    if values[i] then left = left - tonumber(values[i]) end
    if left + need <= tpm then return (second - 60 + i - 1 + 61) * 1000 - now end
  end
  return 61000
end

local function admit(now)
  local rpm, tpm, member, reserve = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
  local second = math.floor(now / 1000)
  local requests = 0
  if rpm >= 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window_ms)
    requests = redis.call('ZCARD', KEYS[1])
    if requests >= rpm then
      local oldest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2])
      return string.format('%d,1,%d,%d,-1', now, oldest + window_ms - now, requests)
    end
  end
  local tokens, low = 0, second - 60
  if tpm >= 0 then
    tokens, low = tokens_at(KEYS[2], second)
    if tokens + reserve > tpm then
      return string.format('%d,2,%d,%d,%d', now, tokens_room_ms(KEYS[2], second, tokens, reserve, tpm, now),
                           requests, tokens)
    end
  end
  if rpm >= 0 then
    redis.call('ZADD', KEYS[1], now, member)
    redis.call('PEXPIRE', KEYS[1], window_ms)
    requests = requests + 1
  end
  if tpm >= 0 and reserve > 0 then
    add_tokens(KEYS[2], second, low, tokens, reserve)
    tokens = tokens + reserve
  end
  return string.format('%d,0,0,%d,%d', now, requests, tokens)
end

local function settle(now)
  local member, at, reserved, used, drop = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
  if drop == '1' then redis.call('ZREM', KEYS[1], member) end
  local delta = used - reserved
  if delta == 0 then return 1 end
  local second = math.floor(now / 1000)
  local sum, low = tokens_at(KEYS[2], second)
  if at >= low and at <= second then
    local had = tonumber(redis.call('HGET', KEYS[2], tostring(at)) or '0')
    if had + delta < 0 then delta = -had end
    if delta ~= 0 then add_tokens(KEYS[2], at, low, sum, delta) end
  elseif delta > 0 then
    -- The admission's second has left the window: what the reservation fell short of counts now.
    add_tokens(KEYS[2], second, low, sum, delta)
  end
  return 1
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'admit' then return admit(now) end
if ARGV[1] == 'settle' then return settle(now) end
return redis.error_reply('unknown provider quota operation ' .. tostring(ARGV[1]))
"""
PROVIDER_QUOTA = Script(_PROVIDER_QUOTA)

ADMITTED, AT_RPM, AT_TPM = 0, 1, 2


def admit_reply(reply: str) -> tuple[int, int, int, int, int]:
    """``admit``'s reply: Redis's time in ms, the verdict, ms until there may be room, requests, tokens (-1: not
    counted)."""
    now_ms, verdict, retry_ms, requests, tokens = map(int, reply.split(","))
    return now_ms, verdict, retry_ms, requests, tokens
