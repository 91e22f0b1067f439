// bench/clients/load.js: the load driver and the checks of bench/clients.sh,
// on Node's own http client with keep-alive connections.  Every request is
// POST /payments with {"amount": 100} and an Idempotency-Key header.
//
//   load.js run URL SECONDS CLIENTS execute PREFIX
//   load.js run URL SECONDS CLIENTS replay COUNT
//       CLIENTS connections, each sending its next request when the last is
//       answered, for SECONDS; new keys PREFIX-c-i, or keys r-0 .. r-COUNT-1
//       that preload answered.  Prints {n, rps, p50, p99, failed} (rps and
//       the percentiles over 2xx answers, in ms).
//   load.js preload URL COUNT CLIENTS
//       executes keys r-0 .. r-COUNT-1.
//   load.js concurrent URL TABLE KEYS SAME PREFIX
//       for each of KEYS keys, SAME requests with it sent at the same moment
//       (four keys at a time), each retried while its answer is a 409 or 5xx
//       or no answer; then the checks below.
//   load.js kill URL TABLE CLIENTS CYCLES PREFIX SERVER-COMMAND...
//       starts the server itself, sends new keys on CLIENTS connections,
//       SIGKILLs the server after 1.5 s, starts it again, retries every
//       request that had no answer and replays every answered one; CYCLES
//       times; then the checks below.
//
// The checks count, in PostgreSQL (PG* variables) and in the answers:
//   duplicates     keys with more than one row in TABLE
//   wrong replays  2xx answers whose body differs from the key's first 2xx
//                  answer, or that name a payment that is not the key's
//                  committed row
//   unresolved     requests that still had no 2xx answer after the retries
//                  (a key left "in progress" for good, for instance), and
//                  how many of those the key's payment committed for
// and print them as JSON.
'use strict';

const http = require('http');
const { spawn } = require('child_process');
const fs = require('fs');
const { Client } = require('pg');

const BODY = JSON.stringify({ amount: 100 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * One request; resolves to { status, body, ms } or { status: 0, error }
 * when no answer came (a refused or reset connection).
 */
function post(agent, url, key) {
  return new Promise((resolve) => {
    const t0 = process.hrtime.bigint();
    const req = http.request(url, {
      method: 'POST', agent,
      headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(BODY),
        'Idempotency-Key': key },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString(),
        ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
      res.on('error', (error) => resolve({ status: 0, error: error.code || error.message }));
    });
    req.setTimeout(60000, () => req.destroy(new Error('timeout')));
    req.on('error', (error) => resolve({ status: 0, error: error.code || error.message }));
    req.end(BODY);
  });
}

const ok = (a) => a.status >= 200 && a.status < 300;
const retryable = (a) => a.status === 0 || a.status === 409 || a.status >= 500;

function pct(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

/** The closed-loop run: CLIENTS connections for SECONDS. */
async function run(url, seconds, clients, mode, arg) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  const lat = [];
  let failed = 0;
  const statuses = {};
  const end = Date.now() + seconds * 1000;
  const count = Number(arg);
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; Date.now() < end; i++) {
      const key = mode === 'execute' ? `${arg}-${c}-${i}` : `r-${Math.floor(Math.random() * count)}`;
      const a = await post(agent, url, key);
      if (ok(a)) lat.push(a.ms);
      else {
        failed++;
        statuses[a.status || a.error] = (statuses[a.status || a.error] || 0) + 1;
      }
    }
  }));
  agent.destroy();
  lat.sort((x, y) => x - y);
  return { n: lat.length, rps: lat.length / seconds, p50: pct(lat, 0.5), p99: pct(lat, 0.99), failed, statuses };
}

async function preload(url, count, clients) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
  let next = 0;
  await Promise.all(Array.from({ length: clients }, async () => {
    while (next < count) {
      const key = `r-${next++}`;
      const a = await post(agent, url, key);
      if (a.status !== 201) throw new Error(`preload: ${key} answered ${a.status} ${a.body ?? a.error}`);
    }
  }));
  agent.destroy();
  return { preloaded: count };
}

/**
 * Sends a request, and again while its answer says to retry, at most
 * `tries` times; every answer is appended to answers[key].
 */
async function settle(agent, url, key, answers, tries = 60) {
  for (let t = 0; t < tries; t++) {
    const a = await post(agent, url, key);
    (answers[key] ??= []).push(a);
    if (!retryable(a)) return a;
    await sleep(100);
  }
  return null;
}

/** The checks, over the answers recorded for the keys. */
async function check(table, answers, unresolved, extra = {}) {
  // unresolved: the key of every request left without a 2xx answer
  const db = new Client();
  await db.connect();
  const keys = Object.keys(answers);
  const { rows } = await db.query(
    `SELECT key, count(*)::int AS n, min(id)::text AS id FROM ${table} WHERE key = ANY($1) GROUP BY key`, [keys]);
  await db.end();
  const committed = new Map(rows.map((r) => [r.key, r]));
  let duplicates = 0;
  let extraRows = 0;
  let wrong = 0;
  let answered = 0;
  let replays = 0;
  for (const r of rows) if (r.n > 1) { duplicates++; extraRows += r.n - 1; }
  for (const key of keys) {
    const good = answers[key].filter(ok);
    if (good.length === 0) continue;
    answered++;
    const first = good[0].body;
    const row = committed.get(key);
    for (const a of good) {
      let id;
      try { id = String(JSON.parse(a.body).id); } catch { id = undefined; }
      // a body unlike the first answer's, or one whose payment is not the
      // key's row (none committed, or another of its duplicates)
      if (a !== good[0]) replays++;
      if (a.body !== first || !row || (row.n === 1 && id !== row.id)) wrong++;
    }
  }
  // of those, the ones whose payment committed: the client cannot learn of it
  const paid = unresolved.filter((k) => committed.has(k)).length;
  return { keys: keys.length, answered, replays, duplicates, extra_rows: extraRows, wrong_replays: wrong,
    unresolved: unresolved.length, unresolved_paid: paid, ...extra };
}

async function concurrent(url, table, nkeys, same, prefix) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });
  const answers = {};
  const unresolved = [];
  const group = 4;
  for (let k = 0; k < nkeys; k += group) {
    const keys = Array.from({ length: Math.min(group, nkeys - k) }, (_, j) => `${prefix}-${k + j}`);
    const results = await Promise.all(keys.flatMap((key) =>
      Array.from({ length: same }, () => settle(agent, url, key, answers))));
    results.forEach((a, i) => {
      if (a === null || !ok(a)) unresolved.push(keys[Math.floor(i / same)]);
    });
  }
  agent.destroy();
  return check(table, answers, unresolved);
}

/** Starts the server command; resolves once /health answers. */
async function startServer(cmd, url) {
  const log = fs.openSync(process.env.SERVER_LOG || '/dev/null', 'a');
  const child = spawn(cmd[0], cmd.slice(1), { stdio: ['ignore', log, log] });
  const health = new URL('/health', url);
  for (let i = 0; i < 600; i++) {
    const up = await new Promise((resolve) => {
      http.get(health, (res) => { res.resume(); resolve(res.statusCode === 200); })
        .on('error', () => resolve(false));
    });
    if (up) return child;
    if (child.exitCode !== null) throw new Error(`the server exited with ${child.exitCode}`);
    await sleep(50);
  }
  throw new Error('the server did not start');
}

async function kill(url, table, clients, cycles, prefix, cmd) {
  const answers = {};
  const unresolved = [];
  let inFlight = 0;
  let child = await startServer(cmd, url);
  for (let cycle = 0; cycle < cycles; cycle++) {
    const agent = new http.Agent({ keepAlive: true, maxSockets: clients });
    let stop = false;
    const pending = [];
    const load = Promise.all(Array.from({ length: clients }, async (_, c) => {
      for (let i = 0; !stop; i++) {
        const key = `${prefix}-${cycle}-${c}-${i}`;
        const a = await post(agent, url, key);
        (answers[key] ??= []).push(a);
        if (!ok(a)) pending.push(key);
      }
    }));
    await sleep(1500);
    stop = true;
    child.kill('SIGKILL');
    await load;
    agent.destroy();
    inFlight += pending.length;
    child = await startServer(cmd, url);
    // every request that had no answer, again; every answered key once more
    const retry = new http.Agent({ keepAlive: true, maxSockets: clients });
    const todo = [...pending.map((k) => [k, true]),
      ...Object.keys(answers).filter((k) => k.startsWith(`${prefix}-${cycle}-`) && !pending.includes(k))
        .map((k) => [k, false])];
    let next = 0;
    await Promise.all(Array.from({ length: clients }, async () => {
      while (next < todo.length) {
        const [key] = todo[next++];
        const a = await settle(retry, url, key, answers);
        if (a === null || !ok(a)) unresolved.push(key);
      }
    }));
    retry.destroy();
  }
  child.kill('SIGTERM');
  return check(table, answers, unresolved, { no_answer_at_kill: inFlight });
}

async function main() {
  const [mode, url, ...a] = process.argv.slice(2);
  const target = new URL('/payments', url).href;
  let out;
  if (mode === 'run') out = await run(target, Number(a[0]), Number(a[1]), a[2], a[3]);
  else if (mode === 'preload') out = await preload(target, Number(a[0]), Number(a[1]));
  else if (mode === 'concurrent') out = await concurrent(target, a[0], Number(a[1]), Number(a[2]), a[3]);
  else if (mode === 'kill') out = await kill(target, a[0], Number(a[1]), Number(a[2]), a[3], a.slice(4));
  else throw new Error(`unknown mode: ${mode}`);
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => {
  console.error(err);
  process.exit(1);
});
