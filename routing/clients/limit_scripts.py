"""The Lua scripts of the Redis limit store (``routing.clients.limit_store``) and how their replies read.

Each runs atomically in Redis. ``LIMITS`` has two operations: ``admit`` checks every limit of a key and its
team and counts the request in all of them or none; ``settle`` returns the slot and adds an answer's tokens and
spend. ``COUNTS`` reads one scope's counts for the admin. Windows run on Redis's clock (``TIME``).
"""

from __future__ import annotations

from routing.clients.redis_client import Script
from routing.core.limits import ScopeCounts

COUNTS_PER_SCOPE = 7  # the numbers of a ScopeCounts in a script's reply

# One script for both operations, so that a Redis that has it for admissions has it for settlements too: a
# settlement is not waited for, and one sent again whole (NOSCRIPT) would reach Redis later than the answer
# reaches the client. ARGV[1] names the operation.
#
# "admit": KEYS: five per scope (req, tok, toksum, slots, spend). ARGV: slot lease ms, window ms, then four per
# scope: rpm, tpm, max concurrency, budget in nano-dollars (-1: unlimited), and last the request id (the fixed
# arguments come first, so they are encoded once per key). Returns one string of comma-separated integers: the
# Redis time in ms, 1 (admitted) or 0, then seven counts per scope taken before this request (see ScopeCounts;
# -1: none). A string, not an array of integers: it is read in one split instead of an element at a time.
# The decision mirrors routing.core.limits.decide: refused when a count has reached its limit.
#
# "settle": KEYS: four per scope (tok, toksum, slots, spend). ARGV: window ms, then two per scope: 1 when it
# limits tokens (else 0), and the unix time its spend key may go (0: kept; -1: the scope has no budget, so its
# spend is not counted); last the request id, its tokens and its nano-dollars. Returns 1.
_LIMITS = """
local function admit(now)
  local lease, window, rid = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[#ARGV]
  local cutoff = now - window
  local out = {''}  -- the first entry becomes the time and the decision, at the end
  local ok = true
  for i = 0, #KEYS / 5 - 1 do
    local k, a = i * 5, 3 + i * 4
    local rpm, tpm = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    local conc, budget = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
    local requests, oldest_req = 0, -1
    if rpm >= 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[k + 1], '-inf', cutoff)
      requests = redis.call('ZCARD', KEYS[k + 1])
      if requests > 0 then oldest_req = tonumber(redis.call('ZRANGE', KEYS[k + 1], 0, 0, 'WITHSCORES')[2]) end
      if requests >= rpm then ok = false end
    end
    local tokens, oldest_tok, tok_retry = 0, -1, -1
    if tpm >= 0 then
      local gone = redis.call('ZRANGEBYSCORE', KEYS[k + 2], '-inf', cutoff)
      if #gone > 0 then
        local sub = 0
        for _, member in ipairs(gone) do sub = sub + tonumber(string.match(member, ':(%d+)$')) end
        redis.call('ZREMRANGEBYSCORE', KEYS[k + 2], '-inf', cutoff)
        redis.call('DECRBY', KEYS[k + 3], sub)
      end
      local first = redis.call('ZRANGE', KEYS[k + 2], 0, 0, 'WITHSCORES')
      if #first > 0 then
        oldest_tok = tonumber(first[2])
        tokens = tonumber(redis.call('GET', KEYS[k + 3]) or '0')
      else
        redis.call('DEL', KEYS[k + 3])
      end
      if tokens >= tpm then
        ok = false
        local entries = redis.call('ZRANGE', KEYS[k + 2], 0, -1, 'WITHSCORES')
        local left = tokens
        for j = 1, #entries, 2 do
          left = left - tonumber(string.match(entries[j], ':(%d+)$'))
          if left < tpm then
            tok_retry = tonumber(entries[j + 1]) + window
            break
          end
        end
      end
    end
    local slots = 0
    if conc >= 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[k + 4], '-inf', now)
      slots = redis.call('ZCARD', KEYS[k + 4])
      if slots >= conc then ok = false end
    end
    local spend = 0
    if budget >= 0 then
      spend = tonumber(redis.call('GET', KEYS[k + 5]) or '0')
      if spend >= budget then ok = false end
    end
    out[#out + 1] = string.format('%d,%d,%d,%d,%d,%d,%d', requests, oldest_req, tokens, oldest_tok, tok_retry,
                                  slots, spend)
  end
  if ok then
    for i = 0, #KEYS / 5 - 1 do
      local k, a = i * 5, 3 + i * 4
      if tonumber(ARGV[a + 1]) >= 0 then
        redis.call('ZADD', KEYS[k + 1], now, rid)
        redis.call('PEXPIRE', KEYS[k + 1], window)
      end
      if tonumber(ARGV[a + 3]) >= 0 then
        redis.call('ZADD', KEYS[k + 4], now + lease, rid)
        redis.call('PEXPIRE', KEYS[k + 4], lease)
      end
    end
  end
  out[1] = string.format('%d,%d', now, ok and 1 or 0)
  return table.concat(out, ',')
end

local function settle(now)
  local n = #ARGV
  local window, rid, tokens, spend = tonumber(ARGV[2]), ARGV[n - 2], tonumber(ARGV[n - 1]), tonumber(ARGV[n])
  for i = 0, #KEYS / 4 - 1 do
    local k, a = i * 4, 2 + i * 2
    redis.call('ZREM', KEYS[k + 3], rid)
    if tokens > 0 and ARGV[a + 1] == '1' then
      redis.call('ZADD', KEYS[k + 1], now, rid .. ':' .. tokens)
      redis.call('INCRBY', KEYS[k + 2], tokens)
      redis.call('PEXPIRE', KEYS[k + 1], window)
      redis.call('PEXPIRE', KEYS[k + 2], window)
    end
    local until_s = tonumber(ARGV[a + 2])
    if spend > 0 and until_s >= 0 then
      redis.call('INCRBY', KEYS[k + 4], spend)
      if until_s > 0 then redis.call('EXPIREAT', KEYS[k + 4], until_s) end
    end
  end
  return 1
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] == 'admit' then return admit(now) end
if ARGV[1] == 'settle' then return settle(now) end
return redis.error_reply('unknown limits operation ' .. tostring(ARGV[1]))
"""

# KEYS: req, tok, toksum, slots, spend of one scope; ARGV: window ms. The same seven counts, read only.
_COUNTS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cutoff = now - tonumber(ARGV[1])
local requests = redis.call('ZCOUNT', KEYS[1], '(' .. cutoff, '+inf')
local first_req = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local entries = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. cutoff, '+inf', 'WITHSCORES')
local tokens = 0
for j = 1, #entries, 2 do tokens = tokens + tonumber(string.match(entries[j], ':(%d+)$')) end
local slots = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
return {now, requests, first_req[2] or -1, tokens, entries[2] or -1, -1, slots,
        tonumber(redis.call('GET', KEYS[5]) or '0')}
"""
LIMITS, COUNTS = Script(_LIMITS), Script(_COUNTS)


def _seconds(ms: int) -> float | None:
    return None if ms < 0 else ms / 1000.0


def counts_at(values: list[int], start: int) -> ScopeCounts:
    """The seven numbers of a script's reply from ``start`` as ``ScopeCounts`` (times in seconds on Redis's
    clock)."""
    requests, oldest_req, tokens, oldest_tok, retry, slots, spend = values[start:start + COUNTS_PER_SCOPE]
    return ScopeCounts(requests, _seconds(oldest_req), tokens, _seconds(oldest_tok), _seconds(retry), slots, spend)


def admit_reply(reply: str) -> tuple[float, bool, list[int]]:
    """``ADMIT``'s reply: Redis's time in seconds, whether it counted the request, and every number (the
    counts of scope i start at ``2 + 7 * i``)."""
    values = list(map(int, reply.split(",")))
    return values[0] / 1000.0, values[1] == 1, values
