// Drives the service the way unreliable clients do: duplicates sent
// concurrently, retries after 409, clients that give up before the answer.
// Prints one line per check, "ok - ..." or "not ok - ...", for the TAP test
// (test/t/040_http_service.pl) to report, then "keys N": how many
// distinct keys should each have exactly one charge.
//
// usage: node test/drive.js http://127.0.0.1:PORT
// PG* variables: a role that may read pg_locks and take advisory locks.  The
// database has a trigger on charges that waits for advisory lock 4242 and
// fails with 57014 for an amount of 57014 (the TAP test creates it), so that
// "in flight" and "timed out" happen when this script says, not by timing.
'use strict';

const { Client } = require('pg');

const base = process.argv[2];
const failures = [];
let charged = new Set();

function check(ok, name, detail) {
  console.log(`${ok ? 'ok' : 'not ok'} - ${name}`);
  if (!ok) {
    failures.push(name);
    if (detail !== undefined) console.log(`# ${JSON.stringify(detail)}`);
  }
}

async function post(key, body, { timeout = 30000, signal } = {}) {
  const headers = { 'Content-Type': 'application/json' };
  if (key !== undefined) headers['Idempotency-Key'] = key;
  const res = await fetch(`${base}/charges`, {
    method: 'POST', headers, body: JSON.stringify(body),
    signal: signal ?? AbortSignal.timeout(timeout),
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    location: res.headers.get('location'),
    type: res.headers.get('content-type'),
    retryAfter: res.headers.get('retry-after'),
    body: bytes.toString('base64'),
  };
}

// what a replay must give back exactly
const answer = (r) => JSON.stringify([r.status, r.location, r.type, r.body]);
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

async function waiters(db, n) {
  for (;;) {
    const { rows: [w] } = await db.query(
      `SELECT count(*)::int AS n FROM pg_catalog.pg_locks
        WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted`);
    if (w.n >= n) return;
    await sleep(10);
  }
}

async function main() {
  const db = new Client();
  await db.connect();

  // 400: no key, or a key the extension refuses
  let r = await post(undefined, { amount: 1, currency: 'eur' });
  check(r.status === 400, 'no Idempotency-Key: 400', r);
  r = await post('x'.repeat(300), { amount: 1, currency: 'eur' });
  check(r.status === 400, 'a key of 300 bytes: 400', r);

  // the first answer, then its replays, byte for byte; the key as a
  // Structured Field string is the same key
  const first = await post('seq-1', { amount: 4250, currency: 'eur' });
  charged.add('seq-1');
  check(first.status === 201 && /^\/charges\/\d+$/.test(first.location) &&
        first.type === 'application/json; charset=utf-8', 'first answer: 201 with Location', first);
  r = await post('seq-1', { currency: 'eur', amount: 4250 });
  check(answer(r) === answer(first), 'retry: the same status, headers and body', [first, r]);
  r = await post('"seq-1"', { amount: 4250, currency: 'eur' });
  check(answer(r) === answer(first), 'retry with the key quoted: the same answer', [first, r]);

  // 422: the key reused for another request
  r = await post('seq-1', { amount: 1, currency: 'eur' });
  check(r.status === 422, 'same key, different request: 422', r);

  // an answer that is an error is kept and replayed too (nothing charged)
  const bad = await post('seq-bad', { amount: -5, currency: 'eur' });
  r = await post('seq-bad', { amount: -5, currency: 'eur' });
  check(bad.status === 400 && answer(r) === answer(bad), 'a 400 answer is replayed', [bad, r]);

  // 503: the statement was canceled (57014); the claim rolled back with it
  r = await post('seq-canceled', { amount: 57014, currency: 'eur' });
  check(r.status === 503 && r.retryAfter === '1', '57014: 503 with Retry-After', r);
  const { rows: [kept] } = await db.query(
    `SELECT count(*)::int AS n FROM idempotency.registry WHERE key = 'seq-canceled'`);
  check(kept.n === 0, '57014: no record kept', kept);

  // in flight: the first request waits in its transaction (lock 4242);
  // a duplicate meanwhile gets 409 with Retry-After; a client that gives
  // up does not stop its request, whose retries replay its answer
  await db.query('SELECT pg_advisory_lock(4242)');
  const flight = post('flight-1', { amount: 700, currency: 'usd' });
  await waiters(db, 1);
  r = await post('flight-1', { amount: 700, currency: 'usd' });
  check(r.status === 409 && /^[1-9][0-9]*$/.test(r.retryAfter ?? ''),
        'duplicate while in flight: 409 with Retry-After', r);
  const abort = new AbortController();
  const gaveUp = post('flight-2', { amount: 800, currency: 'usd' }, { signal: abort.signal })
    .then(() => false, (e) => e.name === 'AbortError');
  await waiters(db, 2);
  abort.abort();
  check(await gaveUp, 'a client gave up while its request was in flight');
  r = await post('flight-2', { amount: 800, currency: 'usd' });
  check(r.status === 409, 'its retry while the request still runs: 409', r);
  await db.query('SELECT pg_advisory_unlock(4242)');
  const flown = await flight;
  check(flown.status === 201, 'the request in flight: 201', flown);
  r = await settle('flight-1', { amount: 700, currency: 'usd' });
  check(answer(r) === answer(flown), 'the duplicate\'s retry replays it', [flown, r]);
  const late = await settle('flight-2', { amount: 800, currency: 'usd' });
  r = await post('flight-2', { amount: 800, currency: 'usd' });
  check(late.status === 201 && answer(r) === answer(late),
        'the request whose client gave up: charged once, replayed', [late, r]);
  charged.add('flight-1').add('flight-2');

  // a storm: every key sent by several concurrent clients, some of which
  // give up after a few milliseconds and retry
  const keys = 15, clients = 6;
  const finals = await Promise.all(Array.from({ length: keys * clients }, async (_, i) => {
    const key = `storm-${i % keys}`;
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

main().catch((e) => {
  console.log(`not ok - the driver failed: ${e.stack}`);
  process.exitCode = 1;
});
