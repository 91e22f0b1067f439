// Drives the service the way unreliable clients do: duplicates sent
// concurrently, retries after 409, clients that give up before the answer.
// Prints one line per check, "ok - ..." or "not ok - ...", for the TAP test
// (test/tap/040_http_service.pl) to report, then "keys N": how many
// distinct keys should each have exactly one charge.  Exits with 1 if a
// check failed, and gives up (with a "not ok" line saying why) when the
// database or the service does not answer, or the whole run takes longer
// than DRIVE_TIMEOUT seconds (120).
//
// usage: node test/drive.js http://127.0.0.1:PORT
// PG* variables: the service's database, as a role that may read
// idempotency.registry (its administrator).  The database needs
// test/hold.sql, a trigger on charges that waits for advisory lock 4242 and
// fails with 57014 for an amount of 57014, so that "in flight" and "timed
// out" happen when this script says, not by timing.  Keys are new on every
// run (a prefix of the run's own), so the script can run again.
'use strict';

const http = require('node:http');
const { Client } = require('pg');

const base = process.argv[2];
const run = `${Date.now().toString(36)}-${process.pid}`;
const failures = [];
let charged = new Set();

function check(ok, name, detail) {
  console.log(`${ok ? 'ok' : 'not ok'} - ${name}`);
  if (!ok) {
    failures.push(name);
    if (detail !== undefined) console.log(`# ${JSON.stringify(detail)}`);
  }
}

// the whole run is bounded: a service or database that stops answering
// ends it with a message instead of a hang
const deadline = Number(process.env.DRIVE_TIMEOUT ?? 120);
setTimeout(() => {
  console.log(`not ok - the driver ended within ${deadline} s (DRIVE_TIMEOUT)`);
  process.exit(1);
}, deadline * 1000).unref();

// POST /charges; the answer with its header lines as sent (rawHeaders keeps
// their order and repeats, which fetch's Headers would not)
function post(key, body, { timeout = 30000, signal } = {}) {
  const data = Buffer.from(JSON.stringify(body));
  const headers = { 'Content-Type': 'application/json', 'Content-Length': data.length };
  if (key !== undefined) headers['Idempotency-Key'] = key;
  const sig = signal ?? AbortSignal.timeout(timeout);
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}/charges`, { method: 'POST', headers, signal: sig }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('close', () => {
        if (!res.complete) return reject(sig.aborted ? sig.reason : new Error('the answer was cut short'));
        const lines = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2)
          lines.push([res.rawHeaders[i], res.rawHeaders[i + 1]]);
        resolve({
          status: res.statusCode,
          lines,
          location: res.headers.location ?? null,
          type: res.headers['content-type'] ?? null,
          retryAfter: res.headers['retry-after'] ?? null,
          body: Buffer.concat(chunks).toString('base64'),
        });
      });
    });
    req.on('error', (e) => reject(sig.aborted ? sig.reason : e));
    req.end(data);
  });
}

// what a replay must give back exactly: the status, every header line in
// its order (but those the server writes afresh for each response) and the
// body
const fresh = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding']);
const answer = (r) =>
  JSON.stringify([r.status, r.lines.filter(([name]) => !fresh.has(name.toLowerCase())), r.body]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// retry until the answer is final (not 409), at most 200 times
async function settle(key, body) {
  for (let i = 0; i < 200; i++) {
    let r;
    try {
      r = await post(key, body);
    } catch (e) {
      continue;
    }
    if (r.status !== 409) return r;
    await sleep(5);
  }
  throw new Error(`${key}: still 409 after 200 tries`);
}

// wait until n requests wait for the lock the driver holds (test/hold.sql)
async function waiters(db, n, timeout = 10000) {
  const until = Date.now() + timeout;
  for (;;) {
    const { rows: [w] } = await db.query(
      `SELECT count(*)::int AS n FROM pg_catalog.pg_locks
        WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted`);
    if (w.n >= n) return;
    if (Date.now() > until)
      throw new Error(`${w.n} of ${n} requests wait for advisory lock 4242 after ${timeout} ms: ` +
                      'does the service use this database, with test/hold.sql run in it?');
    await sleep(10);
  }
}

async function main() {
  if (!/^http:\/\//.test(base ?? '')) throw new Error('usage: node test/drive.js http://HOST:PORT');
  const db = new Client({ connectionTimeoutMillis: 10000, query_timeout: 30000 });
  await db.connect();
  const { rows: [hold] } = await db.query(
    `SELECT count(*)::int AS n FROM pg_catalog.pg_trigger
      WHERE tgname = 'charges_hold' AND tgrelid = pg_catalog.to_regclass('charges')`);
  if (hold.n !== 1) {
    check(false, 'the database has test/hold.sql\'s trigger on charges',
          'run test/hold.sql in the service\'s database first (PG* variables name it)');
    await db.end();
    return;
  }

  // 400: no key, or a key the extension refuses
  let r = await post(undefined, { amount: 1, currency: 'eur' });
  check(r.status === 400, 'no Idempotency-Key: 400', r);
  r = await post('x'.repeat(300), { amount: 1, currency: 'eur' });
  check(r.status === 400, 'a key of 300 bytes: 400', r);

  // the first answer, then its replays, byte for byte; the key as a
  // Structured Field string is the same key
  const first = await post(`seq-1-${run}`, { amount: 4250, currency: 'eur' });
  charged.add(`seq-1-${run}`);
  check(first.status === 201 && /^\/charges\/\d+$/.test(first.location) &&
        first.type === 'application/json; charset=utf-8', 'first answer: 201 with Location', first);
  const id = (first.location ?? '').split('/').pop();
  const stable = first.lines.filter(([name]) => !fresh.has(name.toLowerCase()));
  check(JSON.stringify(stable.slice(0, 4)) === JSON.stringify([
    ['Content-Type', 'application/json; charset=utf-8'], ['Location', `/charges/${id}`],
    ['Link', `</charges/${id}/refunds>; rel="refunds"`], ['Link', `</charges/${id}/receipt>; rel="receipt"`]]),
  'first answer: its header lines in the handler\'s order, Link twice', first.lines);
  r = await post(`seq-1-${run}`, { currency: 'eur', amount: 4250 });
  check(answer(r) === answer(first), 'retry: the same status, header lines (in order) and body', [first, r]);
  r = await post(`"seq-1-${run}"`, { amount: 4250, currency: 'eur' });
  check(answer(r) === answer(first), 'retry with the key quoted: the same answer', [first, r]);

  // 422: the key reused for another request
  r = await post(`seq-1-${run}`, { amount: 1, currency: 'eur' });
  check(r.status === 422, 'same key, different request: 422', r);

  // an answer that is an error is kept and replayed too (nothing charged)
  const bad = await post(`seq-bad-${run}`, { amount: -5, currency: 'eur' });
  r = await post(`seq-bad-${run}`, { amount: -5, currency: 'eur' });
  check(bad.status === 400 && answer(r) === answer(bad), 'a 400 answer is replayed', [bad, r]);

  // 503: the statement was canceled (57014); the claim rolled back with it
  r = await post(`seq-canceled-${run}`, { amount: 57014, currency: 'eur' });
  check(r.status === 503 && r.retryAfter === '1', '57014: 503 with Retry-After', r);
  const { rows: [kept] } = await db.query(
    'SELECT count(*)::int AS n FROM idempotency.registry WHERE key = $1', [`seq-canceled-${run}`]);
  check(kept.n === 0, '57014: no record kept', kept);

  // in flight: the first request waits in its transaction (lock 4242);
  // a duplicate meanwhile gets 409 with Retry-After; a client that gives
  // up does not stop its request, whose retries replay its answer
  await db.query('SELECT pg_advisory_lock(4242)');
  const flight = post(`flight-1-${run}`, { amount: 700, currency: 'usd' });
  await waiters(db, 1);
  r = await post(`flight-1-${run}`, { amount: 700, currency: 'usd' });
  check(r.status === 409 && /^[1-9][0-9]*$/.test(r.retryAfter ?? ''),
        'duplicate while in flight: 409 with Retry-After', r);
  const abort = new AbortController();
  const gaveUp = post(`flight-2-${run}`, { amount: 800, currency: 'usd' }, { signal: abort.signal })
    .then(() => false, (e) => e.name === 'AbortError');
  await waiters(db, 2);
  abort.abort();
  check(await gaveUp, 'a client gave up while its request was in flight');
  r = await post(`flight-2-${run}`, { amount: 800, currency: 'usd' });
  check(r.status === 409, 'its retry while the request still runs: 409', r);
  await db.query('SELECT pg_advisory_unlock(4242)');
  const flown = await flight;
  check(flown.status === 201, 'the request in flight: 201', flown);
  r = await settle(`flight-1-${run}`, { amount: 700, currency: 'usd' });
  check(answer(r) === answer(flown), 'the duplicate\'s retry replays it', [flown, r]);
  const late = await settle(`flight-2-${run}`, { amount: 800, currency: 'usd' });
  r = await post(`flight-2-${run}`, { amount: 800, currency: 'usd' });
  check(late.status === 201 && answer(r) === answer(late),
        'the request whose client gave up: charged once, replayed', [late, r]);
  charged.add(`flight-1-${run}`).add(`flight-2-${run}`);

  // a storm: every key sent by several concurrent clients, some of which
  // give up after a few milliseconds and retry
  const keys = 15, clients = 6;
  const finals = await Promise.all(Array.from({ length: keys * clients }, async (_, i) => {
    const key = `storm-${i % keys}-${run}`;
    const body = { amount: 100 + (i % keys), currency: 'eur' };
    for (let attempt = 0; attempt < 200; attempt++) {
      const timeout = attempt < 3 && Math.random() < 0.5 ? 1 + Math.floor(Math.random() * 20) : 30000;
      try {
        const res = await post(key, body, { timeout });
        if (res.status !== 409) return [key, res];
        await sleep(Math.min(Number(res.retryAfter) * 1000, 5 + Math.random() * 20));
      } catch (e) {
        if (e.name !== 'TimeoutError' && e.name !== 'AbortError') throw e;
      }
    }
    return [key, null];
  }));
  const byKey = new Map();
  for (const [key, res] of finals) {
    charged.add(key);
    if (!byKey.has(key)) byKey.set(key, new Set());
    byKey.get(key).add(res === null ? 'no final answer' : answer(res));
  }
  const split = [...byKey].filter(([, answers]) => answers.size !== 1);
  check(split.length === 0, `storm: every client of a key got the same answer (${keys} keys, ${clients} clients each)`, split);
  check(finals.every(([, res]) => res && res.status === 201), 'storm: every final answer is a 201',
        finals.filter(([, res]) => !res || res.status !== 201));

  await db.end();
  console.log(`keys ${charged.size}`);
}

main().then(() => {
  process.exitCode = failures.length > 0 ? 1 : 0;
}, (e) => {
  console.log(`not ok - the driver failed: ${e.stack}`);
  process.exitCode = 1;
}).finally(() => process.exit());
