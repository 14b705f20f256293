// The Lua scripts the limits run in Redis (./redis-store.ts): one round trip each, atomic where
// the state is. Their verdicts are admissionVerdict's (./admission.ts), in the same order.

/**
 * Checks every limit and, when all pass, reserves the call; returns {'ok'} or {kind, detail, wait}
 * (for a budget held by calls in progress: {kind, spent, held}). Keys per instance (KEYS[1]) and,
 * with global limits, for every workload together (KEYS[4]): `:f` the calls in flight, a sorted
 * set of reservation ids scored by when their lease ends (a call renews its lease while it lives,
 * so the slots of a replica that died, or of an admission whose answer was lost, lapse within one
 * lease), `:w` the calls of the last minute (members `id:tokens` by start time) and `:t` the
 * running sum of their tokens. Money: KEYS[2] the run's, KEYS[3] the workflow's day, KEYS[5] the
 * day's over all, in micro-dollars; beside each, `:h` the money held by calls in progress (a hash
 * of id -> `micro:lease end`: each call's worst case, until it is charged). Budgets arrive in
 * whole micro-dollars rounded up (budgetMicroUsd), 0 meaning none. Each call costs O(log n) plus
 * the entries that leave the window and the calls in progress of its run. The same verdicts, in
 * the same order, as admissionVerdict.
 */
export const ADMIT = `
local now, estimate, id = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local concurrent, rpm, tpm, runBudget, wfBudget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local global = ARGV[9] == '1'
local gConcurrent, gRpm, gTpm, gBudget = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local lease, hold = tonumber(ARGV[14]), tonumber(ARGV[15])
local function slide(prefix)
  local w, t = prefix .. ':w', prefix .. ':t'
  local old = redis.call('ZRANGEBYSCORE', w, '-inf', now - 60000)
  if #old > 0 then
    local gone = 0
    for i = 1, #old do gone = gone + tonumber(string.match(old[i], ':(%d+)$')) end
    redis.call('ZREMRANGEBYSCORE', w, '-inf', now - 60000)
    redis.call('DECRBY', t, gone)
  end
  local count = redis.call('ZCARD', w)
  local tokens, oldest = 0, now
  if count > 0 then
    tokens = tonumber(redis.call('GET', t) or '0')
    oldest = tonumber(redis.call('ZRANGE', w, 0, 0, 'WITHSCORES')[2])
  end
  redis.call('ZREMRANGEBYSCORE', prefix .. ':f', '-inf', now)
  return {redis.call('ZCARD', prefix .. ':f'), count, tokens, math.max(1, math.ceil((60000 - (now - oldest)) / 1000))}
end
local function check(kind, u, limC, limR, limT)
  if limC > 0 and u[1] >= limC then return {kind .. 'concurrency', tostring(u[1])} end
  if limR > 0 and u[2] >= limR then return {kind .. 'requests_per_minute', tostring(u[2]), tostring(u[4])} end
  if limT > 0 and u[3] > 0 and u[3] + estimate > limT then return {kind .. 'tokens_per_minute', tostring(u[3]), tostring(u[4])} end
  return nil
end
local function held(key)
  local h = redis.call('HGETALL', key .. ':h')
  local sum = 0
  for i = 1, #h, 2 do
    local micro, ends = string.match(h[i + 1], '^(%d+):(%d+)$')
    if tonumber(ends) <= now then redis.call('HDEL', key .. ':h', h[i]) else sum = sum + tonumber(micro) end
  end
  return sum
end
local function reserve(prefix, count)
  redis.call('ZADD', prefix .. ':f', now + lease, id)
  redis.call('PEXPIRE', prefix .. ':f', lease + 60000)
  redis.call('ZADD', prefix .. ':w', now, id .. ':' .. estimate)
  if count == 0 then redis.call('SET', prefix .. ':t', estimate) else redis.call('INCRBY', prefix .. ':t', estimate) end
  redis.call('EXPIRE', prefix .. ':w', 120)
  redis.call('EXPIRE', prefix .. ':t', 120)
end
local function hold_on(key)
  redis.call('HSET', key .. ':h', id, hold .. ':' .. (now + lease))
  redis.call('PEXPIRE', key .. ':h', lease + 60000)
end
local runSpent = tonumber(redis.call('GET', KEYS[2]) or '0')
if runBudget > 0 and runSpent >= runBudget then return {'run_budget', tostring(runSpent)} end
local wfSpent = tonumber(redis.call('GET', KEYS[3]) or '0')
if wfBudget > 0 and wfSpent >= wfBudget then return {'workflow_budget', tostring(wfSpent)} end
local allSpent = 0
if global then
  allSpent = tonumber(redis.call('GET', KEYS[5]) or '0')
  if gBudget > 0 and allSpent >= gBudget then return {'global_budget', tostring(allSpent)} end
end
if runBudget > 0 then
  local h = held(KEYS[2])
  if runSpent + h >= runBudget then return {'run_budget_held', tostring(runSpent), tostring(h)} end
end
if wfBudget > 0 then
  local h = held(KEYS[3])
  if wfSpent + h >= wfBudget then return {'workflow_budget_held', tostring(wfSpent), tostring(h)} end
end
if global and gBudget > 0 then
  local h = held(KEYS[5])
  if allSpent + h >= gBudget then return {'global_budget_held', tostring(allSpent), tostring(h)} end
end
local mine = slide(KEYS[1])
local all = nil
if global then all = slide(KEYS[4]) end
local refused = check('', mine, concurrent, rpm, tpm)
if refused then return refused end
if global then
  refused = check('global_', all, gConcurrent, gRpm, gTpm)
  if refused then return refused end
end
reserve(KEYS[1], mine[2])
if global then reserve(KEYS[4], all[2]) end
if hold > 0 then
  if runBudget > 0 then hold_on(KEYS[2]) end
  if wfBudget > 0 then hold_on(KEYS[3]) end
  if global and gBudget > 0 then hold_on(KEYS[5]) end
end
return {'ok'}
`;

/**
 * Renews a call's lease while it lives: its slots and the money it holds, where they still are
 * (a lease that already lapsed is not brought back), and the keys that hold them with it (a key
 * is set to expire a lease and a minute after the last admission that touched it: a long call
 * renews that too, or its slot would vanish with the key).
 */
export const RENEW = `
local id, lease = ARGV[1], tonumber(ARGV[3])
local ends = tonumber(ARGV[2]) + lease
local function renew_slot(set)
  if redis.call('ZSCORE', set, id) then
    redis.call('ZADD', set, 'XX', ends, id)
    if redis.call('PTTL', set) < lease + 60000 then redis.call('PEXPIRE', set, lease + 60000) end
  end
end
renew_slot(KEYS[1] .. ':f')
if ARGV[4] == '1' then renew_slot(KEYS[4] .. ':f') end
for _, key in ipairs({KEYS[2], KEYS[3], KEYS[5]}) do
  local v = redis.call('HGET', key .. ':h', id)
  if v then
    redis.call('HSET', key .. ':h', id, string.match(v, '^(%d+):') .. ':' .. ends)
    if redis.call('PTTL', key .. ':h') < lease + 60000 then redis.call('PEXPIRE', key .. ':h', lease + 60000) end
  end
end
return 'OK'
`;

/**
 * Gives the slot back and charges the call: its real tokens in the windows (while it is still
 * there), its cost to the run, the workflow's day and, with global limits, the day's total; the
 * money it held goes. A charge is applied once per reservation id (a marker kept five minutes,
 * longer than a reconnection and a replay take; a few tens of bytes a call): a charge sent again
 * after the store was away, whose first attempt did run and only lost its answer, charges nothing.
 */
export const RELEASE = `
local id, estimate, tokens, cost = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local global = ARGV[5] == '1'
if not redis.call('SET', 'lim:c:' .. id, '1', 'NX', 'EX', 300) then return 'SETTLED' end
local function settle(prefix)
  redis.call('ZREM', prefix .. ':f', id)
  local member = id .. ':' .. ARGV[2]
  local score = redis.call('ZSCORE', prefix .. ':w', member)
  if score then
    redis.call('ZREM', prefix .. ':w', member)
    redis.call('ZADD', prefix .. ':w', score, id .. ':' .. ARGV[3])
    redis.call('INCRBY', prefix .. ':t', tokens - estimate)
  end
end
settle(KEYS[1])
if global then settle(KEYS[4]) end
for _, key in ipairs({KEYS[2], KEYS[3], KEYS[5]}) do redis.call('HDEL', key .. ':h', id) end
if cost > 0 then
  redis.call('INCRBY', KEYS[2], cost)
  redis.call('EXPIRE', KEYS[2], 172800)
  redis.call('INCRBY', KEYS[3], cost)
  redis.call('EXPIRE', KEYS[3], 172800)
  if global then
    redis.call('INCRBY', KEYS[5], cost)
    redis.call('EXPIRE', KEYS[5], 172800)
  end
end
return 'OK'
`;
