"""The Lua scripts of the Redis limit store (``routing.clients.limit_store``) and how their replies read.

Each runs atomically in Redis. ``LIMITS`` has three operations: ``admit`` checks every limit of a key and its
team and counts the request (and holds its reservation) in all of them or none; ``settle`` returns the slot and
the reservation and adds an answer's tokens and spend; ``seed`` rebuilds a missing spend key. ``COUNTS`` reads
one scope's counts for the admin. Windows run on Redis's clock (``TIME``).
"""

from __future__ import annotations

from routing.clients.redis_client import Script
from routing.core.limits import ScopeCounts

COUNTS_PER_SCOPE = 9  # the numbers of a ScopeCounts in a script's reply
KEYS_PER_SCOPE = 7  # req, tok, slots, spend, resv, resvamt, resvsum

# One script for both operations, so that a Redis that has it for admissions has it for settlements too: a
# settlement is not waited for, and one sent again whole (NOSCRIPT) would reach Redis later than the answer
# reaches the client. ARGV[1] names the operation. KEYS, seven per scope, for both operations: ``req`` (sorted
# set of admission times), ``tok`` (hash: unix second -> tokens settled in it), ``slots`` (request ids by lease
# end), ``spend`` (nano-dollars of the budget period), ``resv`` (request ids holding a reservation, by lease
# end), ``resvamt`` (hash: request id -> "tokens:nanos" reserved), ``resvsum`` (hash: t and n, their sums).
#
# Every step is O(1) in the history: the token window is at most 61 one-second buckets (``tok`` is trimmed at
# every call), and lapsed slots and reservations are those of killed processes only.
#
# "admit": ARGV: slot lease ms, window ms, then four per scope: rpm, tpm, max concurrency, budget in nano-dollars
# (-1: unlimited); last the request id and its reservation (tokens, nano-dollars). Returns one string of
# comma-separated integers: the Redis time in ms, the decision (1 admitted, 0 refused, 2 refused because scope
# i's spend key is missing: it is rebuilt from the database and asked again; then i), and nine counts per scope
# taken before this request (see ScopeCounts; -1: none). A string, not an array of integers: it is read in one
# split instead of an element at a time. The decision mirrors routing.core.limits.decide.
#
# "settle": ARGV: window ms, the number L of budget alert thresholds and their L percentages, then 2 + L per
# scope: 1 when it limits tokens (else 0), the unix time its spend key may go (0: kept; -1: the scope has no
# budget, so its spend is not counted), and the spend in nano-dollars at which each threshold is crossed (-1:
# none); last the request id, its tokens and its nano-dollars. A threshold whose level the added spend carried the
# period's spend to or past is claimed in the set ``<spend key>:alerts`` (SADD: once per scope, period and
# threshold, whichever process settles). Returns 1, or when thresholds were claimed a string of
# ``<scope index>:<percent>:<spend after>`` items separated by commas.
#
# "seed": ARGV: the scope's index, the nano-dollars spent so far this period (from the database), the unix time
# the key may go (0: kept). Sets the spend key only if it is still missing. Returns 1.
_LIMITS = """
local function trim_tokens(key, cutoff_s)
  -- the window's tokens, its oldest second, and its buckets oldest first; buckets out of the window are dropped
  local flat = redis.call('HGETALL', key)
  local total, oldest, buckets, gone = 0, -1, {}, {}
  for j = 1, #flat, 2 do
    local second, tokens = tonumber(flat[j]), tonumber(flat[j + 1])
    if second + 1 <= cutoff_s then
      gone[#gone + 1] = flat[j]
    else
      total = total + tokens
      buckets[#buckets + 1] = {second, tokens}
      if oldest < 0 or second < oldest then oldest = second end
    end
  end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  return total, oldest, buckets
end

local function release(k, rid)
  local held = redis.call('HGET', KEYS[k + 6], rid)
  if held then
    local t, n = string.match(held, '^(%d+):(%d+)$')
    -- only what is nonzero: Lua writes minus zero as "-0", which Redis does not take for an integer
    if t ~= '0' then redis.call('HINCRBY', KEYS[k + 7], 't', '-' .. t) end
    if n ~= '0' then redis.call('HINCRBY', KEYS[k + 7], 'n', '-' .. n) end
    redis.call('HDEL', KEYS[k + 6], rid)
  end
  redis.call('ZREM', KEYS[k + 5], rid)
end

local function reserved(k, now)
  -- lapsed reservations (a process died holding them) are released first
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[k + 5], '-inf', now)
  for _, rid in ipairs(lapsed) do release(k, rid) end
  local sums = redis.call('HMGET', KEYS[k + 7], 't', 'n')
  return tonumber(sums[1] or '0'), tonumber(sums[2] or '0')
end

local function admit(now)
  local lease, window = tonumber(ARGV[2]), tonumber(ARGV[3])
  local n = #ARGV
  local rid, own_tok, own_nanos = ARGV[n - 2], tonumber(ARGV[n - 1]), tonumber(ARGV[n])
  local cutoff = now - window
  local cutoff_s = cutoff / 1000
  local out = {''}  -- the first entry becomes the time and the decision, at the end
  local ok = true
  for i = 0, #KEYS / 7 - 1 do
    local k, a = i * 7, 3 + i * 4
    local rpm, tpm = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local conc, budget = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    local requests, oldest_req = 0, -1
    if rpm >= 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[k + 1], '-inf', cutoff)
      requests = redis.call('ZCARD', KEYS[k + 1])
      if requests > 0 then oldest_req = tonumber(redis.call('ZRANGE', KEYS[k + 1], 0, 0, 'WITHSCORES')[2]) end
      if requests >= rpm then ok = false end
    end
    local res_tok, res_nanos = 0, 0
    if tpm >= 0 or budget >= 0 then res_tok, res_nanos = reserved(k, now) end
    local tokens, oldest_tok, tok_retry = 0, -1, -1
    if tpm >= 0 then
      local buckets
      tokens, oldest_tok, buckets = trim_tokens(KEYS[k + 2], cutoff_s)
      if oldest_tok >= 0 then oldest_tok = oldest_tok * 1000 end
      if tokens >= tpm or tokens + own_tok > tpm or tokens + res_tok + own_tok > tpm then ok = false end
      if tokens >= tpm or tokens + own_tok > tpm then
        local threshold = math.min(tpm - own_tok, tpm - 1)
        table.sort(buckets, function(x, y) return x[1] < y[1] end)
        local left = tokens
        for _, bucket in ipairs(buckets) do
          left = left - bucket[2]
          if left <= threshold then
            tok_retry = (bucket[1] + 1) * 1000 + window
            break
          end
        end
      end
    end
    local slots = 0
    if conc >= 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[k + 3], '-inf', now)
      slots = redis.call('ZCARD', KEYS[k + 3])
      if slots >= conc then ok = false end
    end
    local spend = 0
    if budget >= 0 then
      local raw = redis.call('GET', KEYS[k + 4])
      if not raw then
        -- never read as zero: the store rebuilds it from the database and asks again
        return string.format('%d,2,%d', now, i)
      end
      spend = tonumber(raw)
      if spend >= budget or spend + res_nanos + own_nanos > budget then ok = false end
    end
    out[#out + 1] = string.format('%d,%d,%d,%d,%d,%d,%d,%d,%d', requests, oldest_req, tokens, oldest_tok,
                                  tok_retry, slots, spend, res_tok, res_nanos)
  end
  if ok then
    for i = 0, #KEYS / 7 - 1 do
      local k, a = i * 7, 3 + i * 4
      if tonumber(ARGV[a + 1]) >= 0 then
        redis.call('ZADD', KEYS[k + 1], now, rid)
        redis.call('PEXPIRE', KEYS[k + 1], window)
      end
      if tonumber(ARGV[a + 3]) >= 0 then
        redis.call('ZADD', KEYS[k + 3], now + lease, rid)
        redis.call('PEXPIRE', KEYS[k + 3], lease)
      end
      local t = tonumber(ARGV[a + 2]) >= 0 and own_tok or 0
      local c = tonumber(ARGV[a + 4]) >= 0 and own_nanos or 0
      if t > 0 or c > 0 then
        redis.call('ZADD', KEYS[k + 5], now + lease, rid)
        redis.call('HSET', KEYS[k + 6], rid, string.format('%d:%d', t, c))
        redis.call('HINCRBY', KEYS[k + 7], 't', string.format('%d', t))
        redis.call('HINCRBY', KEYS[k + 7], 'n', string.format('%d', c))
        redis.call('PEXPIRE', KEYS[k + 5], lease)
        redis.call('PEXPIRE', KEYS[k + 6], lease)
        redis.call('PEXPIRE', KEYS[k + 7], lease)
      end
    end
  end
  out[1] = string.format('%d,%d', now, ok and 1 or 0)
  return table.concat(out, ',')
end

local function settle(now)
  local n = #ARGV
  local window, rid, tokens, spend = tonumber(ARGV[2]), ARGV[n - 2], tonumber(ARGV[n - 1]), tonumber(ARGV[n])
  local levels = tonumber(ARGV[3])
  local second = math.floor(now / 1000)
  local fired = {}
  for i = 0, #KEYS / 7 - 1 do
    local k, a = i * 7, 3 + levels + i * (2 + levels)
    redis.call('ZREM', KEYS[k + 3], rid)
    release(k, rid)
    if tokens > 0 and ARGV[a + 1] == '1' then
      trim_tokens(KEYS[k + 2], (now - window) / 1000)
      redis.call('HINCRBY', KEYS[k + 2], second, tokens)
      redis.call('PEXPIRE', KEYS[k + 2], window + 1000)
    end
    local until_s = tonumber(ARGV[a + 2])
    if spend > 0 and until_s >= 0 then
      -- a spend key that is missing here (evicted, or Redis restarted empty) is rebuilt from the database at the
      -- next admission, which then counts this answer too (it is audited): nothing is added to a missing key
      if redis.call('EXISTS', KEYS[k + 4]) == 1 then
        local after = redis.call('INCRBY', KEYS[k + 4], spend)
        if until_s > 0 then redis.call('EXPIREAT', KEYS[k + 4], until_s) end
        for j = 1, levels do
          local level = tonumber(ARGV[a + 2 + j])
          if level >= 0 and after - spend < level and level <= after then
            local claims = KEYS[k + 4] .. ':alerts'
            if redis.call('SADD', claims, ARGV[3 + j]) == 1 then
              fired[#fired + 1] = string.format('%d:%s:%d', i, ARGV[3 + j], after)
            end
            if until_s > 0 then redis.call('EXPIREAT', claims, until_s) end
          end
        end
      end
    end
  end
  if #fired == 0 then return 1 end
  return table.concat(fired, ',')
end

local function seed()
  local k = tonumber(ARGV[2]) * 7
  local set = redis.call('SET', KEYS[k + 4], ARGV[3], 'NX')
  local until_s = tonumber(ARGV[4])
  if set and until_s > 0 then redis.call('EXPIREAT', KEYS[k + 4], until_s) end
  return 1
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'admit' then return admit(now) end
if ARGV[1] == 'settle' then return settle(now) end
if ARGV[1] == 'seed' then return seed() end
return redis.error_reply('unknown limits operation ' .. tostring(ARGV[1]))
"""

# KEYS: the seven keys of one scope; ARGV: window ms. The same nine counts, read only.
_COUNTS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cutoff = now - tonumber(ARGV[1])
local requests = redis.call('ZCOUNT', KEYS[1], '(' .. cutoff, '+inf')
local first_req = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local flat = redis.call('HGETALL', KEYS[2])
local tokens, oldest = 0, -1
for j = 1, #flat, 2 do
  local second = tonumber(flat[j])
  if (second + 1) * 1000 > cutoff then
    tokens = tokens + tonumber(flat[j + 1])
    if oldest < 0 or second < oldest then oldest = second end
  end
end
if oldest >= 0 then oldest = oldest * 1000 end
local slots = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
local sums = redis.call('HMGET', KEYS[7], 't', 'n')
return {now, requests, first_req[2] or -1, tokens, oldest, -1, slots,
        tonumber(redis.call('GET', KEYS[4]) or '0'), tonumber(sums[1] or '0'), tonumber(sums[2] or '0')}
"""
LIMITS, COUNTS = Script(_LIMITS), Script(_COUNTS)


def _seconds(ms: int) -> float | None:
    return None if ms < 0 else ms / 1000.0


def counts_at(values: list[int], start: int) -> ScopeCounts:
    """The seven numbers of a script's reply from ``start`` as ``ScopeCounts`` (times in seconds on Redis's
    clock)."""
    requests, oldest_req, tokens, oldest_tok, retry, slots, spend, reserved_tokens, reserved_nanos = (
        values[start:start + COUNTS_PER_SCOPE])
    return ScopeCounts(requests, _seconds(oldest_req), tokens, _seconds(oldest_tok), _seconds(retry), slots, spend,
                       reserved_tokens, reserved_nanos)


ADMITTED, REFUSED, SPEND_MISSING = 1, 0, 2


def claimed_thresholds(reply: object) -> list[tuple[int, int, int]]:
    """``settle``'s reply as (scope index, percent, spend after) for each threshold it claimed; none for 1."""
    if not isinstance(reply, str):
        return []
    out = []
    for item in reply.split(","):
        index, percent, after = item.split(":")
        out.append((int(index), int(percent), int(after)))
    return out


def admit_reply(reply: str) -> tuple[float, int, list[int]]:
    """``admit``'s reply: Redis's time in seconds, the decision (``ADMITTED``, ``REFUSED``, or ``SPEND_MISSING``
    with the scope's index at ``values[2]``), and every number (the counts of scope i start at ``2 + 9 * i``)."""
    values = list(map(int, reply.split(",")))
    return values[0] / 1000.0, values[1], values
