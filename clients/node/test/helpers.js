// What the tests share.  They start no database: the PG* environment
// variables name one (through PgBouncer, as a service would connect) where
// test/schema.sql ran, as the role it granted.  IDEMPOTENCY_EDITION says
// which edition of the extension is installed there (c or portable).
'use strict';

const http = require('node:http');
const { Pool } = require('pg');

const edition = process.env.IDEMPOTENCY_EDITION ?? 'c';
if (!['c', 'portable'].includes(edition)) throw new Error(`IDEMPOTENCY_EDITION: c or portable, not ${edition}`);

// keys of this run only, so the tests can run again on the same database
const run = `${Date.now().toString(36)}-${process.pid}`;

/** A pool from the PG* variables, with node-postgres's defaults otherwise. */
function pool() {
  const p = new Pool({ max: 12, connectionTimeoutMillis: 20000 });
  p.on('error', () => {});
  return p;
}

/**
 * A request; the answer with its header lines as sent (rawHeaders keeps
 * their order and repeats).
 * @returns {Promise<{ status: number, lines: string[][], body: Buffer, header: (n: string) => string | undefined }>}
 */
function request(base, path, { method = 'POST', key, body, timeout = 60000, signal } = {}) {
  const data = body === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(body));
  const headers = { 'Content-Length': data.length };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (key !== undefined) headers['Idempotency-Key'] = key;
  const sig = signal ?? AbortSignal.timeout(timeout);
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}${path}`, { method, headers, signal: sig, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('close', () => {
        if (!res.complete) return reject(sig.aborted ? sig.reason : new Error('the answer was cut short'));
        const lines = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) lines.push([res.rawHeaders[i], res.rawHeaders[i + 1]]);
        resolve({
          status: res.statusCode, lines, body: Buffer.concat(chunks),
          header: (n) => res.headers[n.toLowerCase()],
        });
      });
    });
    req.on('error', (e) => reject(sig.aborted ? sig.reason : e));
    req.end(data);
  });
}

// what a replay must give back exactly: the status, every header line in
// its order (but those the server writes afresh, and the replay's mark) and
// the body
const fresh = new Set(['date', 'connection', 'keep-alive', 'transfer-encoding', 'idempotent-replayed']);
const answer = (r) => JSON.stringify([r.status,
  r.lines.filter(([name]) => !fresh.has(name.toLowerCase())), r.body.toString('base64')]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Retries until the answer is final (not 409), for at most 30 s. */
async function settle(send) {
  const until = Date.now() + 30000;
  while (Date.now() < until) {
    let r;
    try {
      r = await send();
    } catch (e) {
      continue;
    }
    if (r.status !== 409) return r;
    await sleep(10);
  }
  throw new Error('still 409 after 30 s');
}

/**
 * Holds advisory lock 4242 in a transaction of its own, which a trigger on
 * charges waits for: every charge is in flight until release().  A
 * transaction, not a session lock, so that it holds behind PgBouncer in
 * transaction mode (it pins one server connection until it ends).
 */
async function hold(db) {
  const c = await db.connect();
  await c.query('BEGIN');
  await c.query('SELECT pg_advisory_xact_lock(4242)');
  return {
    release: async () => {
      await c.query('COMMIT');
      c.release();
    },
  };
}

/** Waits until n transactions wait for lock 4242 (bounded: 10 s). */
async function waiters(db, n) {
  const until = Date.now() + 10000;
  for (;;) {
    const { rows: [w] } = await db.query(`SELECT count(*)::int AS n FROM pg_catalog.pg_locks
        WHERE locktype = 'advisory' AND objid = 4242 AND NOT granted`);
    if (w.n >= n) return;
    if (Date.now() > until) throw new Error(`${w.n} of ${n} requests wait for advisory lock 4242`);
    await sleep(10);
  }
}

/** How many charges each key of this run has. */
async function chargesByKey(db, prefix) {
  const { rows } = await db.query(`SELECT idempotency_key AS key, count(*)::int AS n FROM charges
      WHERE idempotency_key LIKE $1 || '%' GROUP BY 1`, [prefix]);
  return Object.fromEntries(rows.map((r) => [r.key, r.n]));
}

module.exports = { edition, run, pool, request, answer, sleep, settle, hold, waiters, chargesByKey };
