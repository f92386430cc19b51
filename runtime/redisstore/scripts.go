package redisstore

import "github.com/redis/rueidis"

// The lease store's Lua scripts, all of them. Each touches the record's keys only: KEYS[1], the
// record's hash, and KEYS[2], its tombstone (tombstoneName), which share a hash tag, so each
// script runs on the node that owns their slot (Redis Cluster) and is atomic there. Every clock decision uses the server's TIME; durations travel as integer microseconds.
//
// The record's hash fields:
//
//	o   operation ID                 s   state: "r" running, "c" completed
//	f   fingerprint: 2-byte version, big-endian, then the 32-byte SHA-256
//	t   fencing token (decimal)      l   lease end, server clock in µs (running only)
//	rs  response status (decimal)    rh  response headers (JSON)
//	rb  response body                ro  "1" when the body was omitted
//
//	ca  claimed at, server clock in µs   da  completed at, µs (completed only)
//	pc  the calls its call phase started (Store.BeginCall): a JSON array of
//	    {"l": label, "k": provider key, "a": amount, "c": currency, "t": µs}, in start order
//	u   running only: why it is uncertain (store.Uncertainty, decimal)   ua  when it was marked, µs
//
// The tombstone is a string, written with the completion when the operation keeps one and
// expiring when its horizon ends: the status class, ':', the completion time (µs), ':', then the
// fingerprint's 2-byte version and its sum's first 16 bytes (store.TombstoneSumBytes). A key
// without a record but with a tombstone is answered with it (state "x").
//
// The keys' own expiry (PEXPIRE) does what a sweeper would: a completed record vanishes when its
// retention ends (its tombstone answers for the key until its own expiry, then the key is new
// again); a running record is kept, whatever its retention, until
// the abandon delay has passed after its lease's end (the "abandon µs" argument of the scripts
// that move a lease), so its owner can still complete it and no other request sees the key as
// new.

// prelude is shared by every script: the server's clock, number formatting, and the reply of a
// live record.
const prelude = `
if redis.replicate_commands then redis.replicate_commands() end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function fmt(n) return string.format('%.0f', n) end
local function ms(us) return math.max(1, math.ceil(us / 1000)) end
-- keep: a running record's key lives until abandon µs after its lease ends at l (µs).
local function keep(k, l, now, abandon)
  redis.call('PEXPIRE', k, ms(l - now + abandon))
end
-- record: {o, f, s, t, lease left µs, pttl ms, rs, rh, rb, ro}, or nil when there is none.
local function record(k, now)
  local v = redis.call('HMGET', k, 'o', 'f', 's', 't', 'l', 'rs', 'rh', 'rb', 'ro')
  if not v[3] then return nil end
  local left = 0
  if v[3] == 'r' then left = tonumber(v[5]) - now end
  return {v[1], v[2], v[3], v[4], fmt(left), redis.call('PTTL', k), v[6] or '', v[7] or '', v[8] or '', v[9] or ''}
end
-- tomb: the key's tombstone as a record reply {"", "", "x", "0", "0", pttl ms, value, "", "", ""},
-- or nil when there is none.
local function tomb(k)
  local v = redis.call('GET', k)
  if not v then return nil end
  return {'', '', 'x', '0', '0', redis.call('PTTL', k), v, '', '', ''}
end
-- held: whether the record is running under token tok.
local function held(k, tok)
  local v = redis.call('HMGET', k, 's', 't')
  return v[1] == 'r' and v[2] == tok
end
`

// scriptGet returns the live record, else the tombstone, or an empty array.
var scriptGet = rueidis.NewLuaScript(prelude + `
return record(KEYS[1], now_us()) or tomb(KEYS[2]) or {}
`)

// scriptReserve claims the key (ARGV: operation, fingerprint, lease µs, abandon µs) and
// returns the new token as a string, or returns the live record, or the key's tombstone. The token is the server's
// clock in µs: larger than any earlier claim's of the key, even one whose record has expired
// and vanished, as long as the server's clock does not step back.
var scriptReserve = rueidis.NewLuaScript(prelude + `
local now = now_us()
local r = record(KEYS[1], now) or tomb(KEYS[2])
if r then return r end
local l = now + tonumber(ARGV[3])
local tok = fmt(now)
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'f', ARGV[2], 's', 'r', 't', tok, 'l', fmt(l), 'ca', fmt(now))
keep(KEYS[1], l, now, tonumber(ARGV[4]))
return tok
`)

// scriptTakeOver moves a running record whose lease has ended from token ARGV[1] to a new token
// with a lease of ARGV[2] µs (abandon µs: ARGV[3]) and returns it; nil when the record is not
// running under that token with an ended lease.
var scriptTakeOver = rueidis.NewLuaScript(prelude + `
local now = now_us()
local v = redis.call('HMGET', KEYS[1], 's', 't', 'l')
if v[1] ~= 'r' or v[2] ~= ARGV[1] or tonumber(v[3]) > now then return false end
local l = now + tonumber(ARGV[2])
local tok = fmt(math.max(tonumber(v[2]) + 1, now))
redis.call('HSET', KEYS[1], 't', tok, 'l', fmt(l))
if redis.call('HEXISTS', KEYS[1], 'pc') == 1 then
  -- its call phase had started calls: uncertain (taken over) until the new owner completes
  redis.call('HSET', KEYS[1], 'u', '4', 'ua', fmt(now))
end
keep(KEYS[1], l, now, tonumber(ARGV[3]))
return tok
`)

// scriptExtend moves the lease end of the record running under ARGV[1] to ARGV[2] µs from now
// (with ARGV[3] = "1", only if that is later than its current end; abandon µs: ARGV[4]); 1, or
// 0 when the record is not held under that token.
var scriptExtend = rueidis.NewLuaScript(prelude + `
if not held(KEYS[1], ARGV[1]) then return 0 end
local now = now_us()
local l = now + tonumber(ARGV[2])
if ARGV[3] == '1' then l = math.max(l, tonumber(redis.call('HGET', KEYS[1], 'l'))) end
redis.call('HSET', KEYS[1], 'l', fmt(l))
keep(KEYS[1], l, now, tonumber(ARGV[4]))
return 1
`)

// scriptComplete stores a response in the record running under ARGV[1] and makes it completed
// for ARGV[8] µs, and writes its tombstone for ARGV[9] µs (none when 0). ARGV: token, operation
// and fingerprint ("" keeps the record's own), status, headers, body, omitted ("1"/"0"),
// retention µs, tombstone µs. 1, or 0 when the record is not held under that token. The paired store also settles a running record into the completed record the
// database holds, which may name another operation or request: hence the operation and
// fingerprint.
var scriptComplete = rueidis.NewLuaScript(prelude + `
if not held(KEYS[1], ARGV[1]) then return 0 end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'o', ARGV[2], 'f', ARGV[3]) end
local now = now_us()
redis.call('HSET', KEYS[1], 's', 'c', 'rs', ARGV[4], 'rh', ARGV[5], 'rb', ARGV[6], 'ro', ARGV[7], 'da', fmt(now))
redis.call('HDEL', KEYS[1], 'l', 'u', 'ua')
redis.call('PEXPIRE', KEYS[1], ms(tonumber(ARGV[8])))
if tonumber(ARGV[9]) > 0 then
  local f = redis.call('HGET', KEYS[1], 'f')
  local class = math.floor(tonumber(ARGV[4]) / 100)
  redis.call('SET', KEYS[2], class .. ':' .. fmt(now) .. ':' .. string.sub(f, 1, 18), 'PX', ms(tonumber(ARGV[9])))
end
return 1
`)

// scriptRelease deletes the record running under ARGV[1]; 1, or 0 when it is not held under
// that token.
var scriptRelease = rueidis.NewLuaScript(prelude + `
if not held(KEYS[1], ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1])
return 1
`)

// scriptBeginCall records a call (ARGV[3], a JSON object without "t") of the record running
// under ARGV[1], unless a call labelled ARGV[2] is recorded already; 1, or 0 when the record is
// not held under that token.
var scriptBeginCall = rueidis.NewLuaScript(prelude + `
if not held(KEYS[1], ARGV[1]) then return 0 end
local pc = redis.call('HGET', KEYS[1], 'pc')
local calls = {}
if pc then calls = cjson.decode(pc) end
for _, c in ipairs(calls) do
  if c.l == ARGV[2] then return 1 end
end
local c = cjson.decode(ARGV[3])
c.t = fmt(now_us())
table.insert(calls, c)
redis.call('HSET', KEYS[1], 'pc', cjson.encode(calls))
return 1
`)

// scriptMarkUncertain marks the record running under ARGV[1] uncertain for reason ARGV[2] when
// its call phase started calls; 1 when it did.
var scriptMarkUncertain = rueidis.NewLuaScript(prelude + `
if not held(KEYS[1], ARGV[1]) or redis.call('HEXISTS', KEYS[1], 'pc') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'u', ARGV[2], 'ua', fmt(now_us()))
return 1
`)

// scriptClock returns the server's TIME ({seconds, microseconds}) from the node that owns
// KEYS[1] (TIME itself has no key, so a cluster client would send it to any node). The replay
// cache asks it after a miss: its copies' expiry is counted on that node's clock. Its lookups
// are plain GET and PTTL, without Lua, which costs Redis half the CPU.
var scriptClock = rueidis.NewLuaScriptReadOnly(`return redis.call('TIME')`)
