// The Idempotency-Key middleware on Express and on Fastify, against a real
// database: the statuses of the draft, replays byte for byte with the header
// lines in order, and one effect per key under concurrent duplicates,
// clients that give up and a worker killed mid-request.
'use strict';

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const apps = require('./app');
const { run, pool, request, answer, settle, hold, waiters, chargesByKey, sleep } = require('./helpers');

for (const framework of ['express', 'fastify']) {
  describe(`${framework}`, () => {
    const db = pool();
    let server;
    const prefix = `${framework}-${run}-`;
    const k = (name) => `${prefix}${name}`;
    const post = (p, key, body, opts) => request(server.base, p, { key, body, ...opts });

    before(async () => { server = await apps[framework](db).listen(); });
    after(async () => {
      await server.close();
      await db.end();
    });

    it('answers 400 without a key, and for a key the extension refuses', async () => {
      let r = await post('/charges', undefined, { amount: 1 });
      assert.equal(r.status, 400);
      r = await post('/charges', 'x'.repeat(300), { amount: 1 });
      assert.equal(r.status, 400, r.body.toString());
      assert.deepEqual(await chargesByKey(db, 'x'.repeat(300)), {});
    });

    it('runs a request without a key when the key is not required', async () => {
      const r = await post('/optional', undefined, { amount: 3 });
      assert.equal(r.status, 201);
      assert.equal(r.header('idempotent-replayed'), undefined);
    });

    it('replays the first answer: status, header lines in order, body byte for byte', async () => {
      const first = await post('/charges', k('seq'), { amount: 4250, currency: 'eur' });
      assert.equal(first.status, 201);
      const id = JSON.parse(first.body).id;
      const lines = first.lines.filter(([n]) => !['date', 'connection', 'keep-alive'].includes(n.toLowerCase()));
      assert.deepEqual(lines, [
        ['Content-Type', 'application/json; charset=utf-8'], ['Location', `/charges/${id}`],
        ['Link', `</charges/${id}/refunds>; rel="refunds"`], ['Set-Cookie', 'a=1'],
        ['Link', `</charges/${id}/receipt>; rel="receipt"`], ['Set-Cookie', 'b=2'],
        ['Content-Length', String(first.body.length)]]);
      assert.equal(first.header('idempotent-replayed'), undefined, 'the first answer is not marked');
      // the body's keys in another order are the same request (jsonb)
      const again = await post('/charges', k('seq'), { currency: 'eur', amount: 4250 });
      assert.equal(answer(again), answer(first));
      assert.equal(again.header('idempotent-replayed'), 'true');
      const quoted = await post('/charges', `"${k('seq')}"`, { amount: 4250, currency: 'eur' });
      assert.equal(answer(quoted), answer(first), 'the key as a Structured Field string is the same key');
      assert.deepEqual(await chargesByKey(db, k('seq')), { [k('seq')]: 1 });
    });

    it('sends a new key in three round trips, BEGIN with the claim and the answer with COMMIT, and a replay in two', async () => {
      // a round trip: a query sent while none of the client's is in flight
      let trips = 0;
      const counted = pool();
      counted.on('connect', (client) => {
        let inFlight = 0;
        const query = client.query;
        client.query = function (...args) {
          if (inFlight++ === 0) trips++;
          const done = () => { inFlight--; };
          const r = query.apply(this, args);
          if (r && typeof r.then === 'function') r.then(done, done);
          else done();
          return r;
        };
      });
      const counting = await apps[framework](counted).listen();
      try {
        const first = await request(counting.base, '/charges', { key: k('trips'), body: { amount: 7 } });
        assert.equal(first.status, 201);
        assert.equal(trips, 3, 'BEGIN and begin, the handler\'s INSERT, finish and COMMIT');
        trips = 0;
        const again = await request(counting.base, '/charges', { key: k('trips'), body: { amount: 7 } });
        assert.equal(answer(again), answer(first));
        assert.equal(trips, 2, 'BEGIN and begin, COMMIT');
        trips = 0;
        const other = await request(counting.base, '/charges', { key: k('trips'), body: { amount: 8 } });
        assert.equal(other.status, 422);
        assert.equal(trips, 2, 'BEGIN and begin, which fails, then ROLLBACK');
      } finally {
        await counting.close();
        await counted.end();
      }
      assert.deepEqual(await chargesByKey(db, k('trips')), { [k('trips')]: 1 });
    });

    it('replays bytes that are not text, byte for byte', async () => {
      const first = await post('/bytes', k('bytes'), {});
      const again = await post('/bytes', k('bytes'), {});
      assert.deepEqual([...first.body], [0, 255, 13, 10, 128, 1]);
      assert.equal(answer(again), answer(first));
    });

    it('can replay without marking the replay', async () => {
      const first = await post('/exact', k('exact'), { amount: 5 });
      const again = await post('/exact', k('exact'), { amount: 5 });
      assert.equal(again.header('idempotent-replayed'), undefined);
      assert.equal(answer(again), answer(first));
    });

    it('answers 422 for the key reused with another body, and scopes keys by route', async () => {
      const first = await post('/charges', k('reuse'), { amount: 10 });
      assert.equal(first.status, 201);
      const r = await post('/charges', k('reuse'), { amount: 11 });
      assert.equal(r.status, 422);
      // another route is another scope: the key is another request there
      const other = await post('/charges/1/refunds', k('reuse'), { amount: 11 });
      assert.equal(other.status, 201);
      assert.deepEqual(await chargesByKey(db, k('reuse')), { [k('reuse')]: 2 });
    });

    it('stores a 4xx answer, and neither stores nor commits a 5xx one', async () => {
      const bad = await post('/charges', k('bad'), { amount: -5 });
      const again = await post('/charges', k('bad'), { amount: -5 });
      assert.equal(bad.status, 400);
      assert.equal(answer(again), answer(bad));
      assert.equal(again.header('idempotent-replayed'), 'true');
      const failed = await post('/charges', k('5xx'), { amount: 500 });
      assert.equal(failed.status, 500);
      assert.deepEqual(await chargesByKey(db, k('5xx')), {}, 'the handler\'s write rolled back');
      const retry = await post('/charges', k('5xx'), { amount: 500 });
      assert.equal(retry.status, 500);
      assert.equal(retry.header('idempotent-replayed'), undefined, 'the retry executed again');
    });

    it('maps SQLSTATEs: 40001 and 40P01 to 409, 57014 and 55P03 to 503, with Retry-After 1', async () => {
      for (const [fail, status] of [['40001', 409], ['40P01', 409], ['57014', 503], ['55P03', 503]]) {
        const r = await post('/charges', k(`fail-${fail}`), { amount: 7, fail });
        assert.equal(r.status, status, `${fail}: ${r.body}`);
        assert.equal(r.header('retry-after'), '1', fail);
        const { rows } = await db.query('SELECT count(*)::int AS n FROM idempotency.my_records WHERE key = $1',
          [k(`fail-${fail}`)]);
        assert.equal(rows[0].n, 0, `${fail}: nothing kept`);
      }
    });

    it('answers 409 with Retry-After while the first request is in flight; a client that gave up is charged once', async () => {
      const lock = await hold(db);
      let flight;
      try {
        flight = post('/charges', k('flight'), { amount: 700 });
        await waiters(db, 1);
        const dup = await post('/charges', k('flight'), { amount: 700 });
        assert.equal(dup.status, 409);
        assert.match(dup.header('retry-after') ?? '', /^[1-9][0-9]*$/);
        // a client that gives up before the answer does not stop its request
        const abort = new AbortController();
        const gaveUp = post('/charges', k('gave-up'), { amount: 800 }, { signal: abort.signal })
          .then(() => false, (e) => e.name === 'AbortError');
        await waiters(db, 2);
        abort.abort();
        assert.equal(await gaveUp, true);
        const retry = await post('/charges', k('gave-up'), { amount: 800 });
        assert.equal(retry.status, 409, 'its retry while it still runs');
      } finally {
        await lock.release();
      }
      const flown = await flight;
      assert.equal(flown.status, 201);
      assert.equal(answer(await settle(() => post('/charges', k('flight'), { amount: 700 }))), answer(flown));
      const late = await settle(() => post('/charges', k('gave-up'), { amount: 800 }));
      assert.equal(late.status, 201);
      assert.equal(late.header('idempotent-replayed'), 'true', 'the request whose client gave up ran to its end');
      assert.deepEqual(await chargesByKey(db, k('flight')), { [k('flight')]: 1 });
      assert.deepEqual(await chargesByKey(db, k('gave-up')), { [k('gave-up')]: 1 });
    });

    it('lets a duplicate wait (maxWait) and replay the first answer', async () => {
      const lock = await hold(db);
      let first;
      let dup;
      try {
        first = post('/waiting', k('wait'), { amount: 900 });
        await waiters(db, 1);
        dup = post('/waiting', k('wait'), { amount: 900 });
        // the duplicate waits in idempotent_begin for the first one's key:
        // on the key's lock in the C edition, on the first one's claim (its
        // transaction) in the portable edition
        await waitFor(db, `SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity
            WHERE wait_event_type = 'Lock' AND wait_event IN ('advisory', 'transactionid')
              AND query LIKE '%idempotent_begin%'`);
      } finally {
        await lock.release();
      }
      const [a, b] = await Promise.all([first, dup]);
      assert.equal(a.status, 201);
      assert.equal(b.header('idempotent-replayed'), 'true');
      assert.equal(answer(b), answer(a));
    });

    it('runs a SQL handler under the key in one statement: one round trip, replays byte for byte', async () => {
      let trips = 0;
      const counted = pool();
      counted.on('connect', (client) => {
        const query = client.query;
        client.query = function (...args) { trips++; return query.apply(this, args); };
      });
      const counting = await apps[framework](counted).listen();
      let first;
      try {
        first = await request(counting.base, '/sql', { key: k('sql'), body: { amount: 31 } });
        assert.equal(first.status, 201, first.body.toString());
        assert.equal(trips, 1, 'idempotent_call alone, in autocommit');
        const id = JSON.parse(first.body).id;
        const lines = first.lines.filter(([n]) => !['date', 'connection', 'keep-alive'].includes(n.toLowerCase()));
        assert.deepEqual(lines, [
          ['Content-Type', 'application/json; charset=utf-8'], ['Location', `/charges/${id}`],
          ['Link', `</charges/${id}/refunds>; rel="refunds"`], ['Set-Cookie', 'a=1'],
          ['Link', `</charges/${id}/receipt>; rel="receipt"`], ['Content-Length', String(first.body.length)]]);
        trips = 0;
        const again = await request(counting.base, '/sql', { key: k('sql'), body: { amount: 31 } });
        assert.equal(trips, 1);
        assert.equal(answer(again), answer(first));
        assert.equal(again.header('idempotent-replayed'), 'true');
      } finally {
        await counting.close();
        await counted.end();
      }
      const other = await post('/sql', k('sql'), { amount: 32 });
      assert.equal(other.status, 422, 'the key reused with another body');
      assert.equal((await post('/sql', undefined, { amount: 1 })).status, 400, 'no key');
      assert.deepEqual(await chargesByKey(db, k('sql')), { [k('sql')]: 1 });
    });

    it('answers 409 for a SQL handler in flight, maps its errors, and keeps nothing of a failed one', async () => {
      const lock = await hold(db);
      let flight;
      try {
        flight = post('/sql', k('sql-flight'), { amount: 33 });
        await waiters(db, 1);
        const dup = await post('/sql', k('sql-flight'), { amount: 33 });
        assert.equal(dup.status, 409);
        assert.match(dup.header('retry-after') ?? '', /^[1-9][0-9]*$/);
      } finally {
        await lock.release();
      }
      const flown = await flight;
      assert.equal(flown.status, 201);
      assert.equal(answer(await post('/sql', k('sql-flight'), { amount: 33 })), answer(flown));
      const failed = await post('/sql', k('sql-fail'), { amount: 34, fail: '40001' });
      assert.equal(failed.status, 409, 'a serialization failure in the handler: retry');
      // the handler's own 22P02 is its bug, not a bad key: the framework's 500
      const bug = await post('/sql', k('sql-bug'), { amount: 'many' });
      assert.equal(bug.status, 500, bug.body.toString());
      const { rows } = await db.query('SELECT count(*)::int AS n FROM idempotency.my_records WHERE key = ANY($1)',
        [[k('sql-fail'), k('sql-bug')]]);
      assert.equal(rows[0].n, 0, 'nothing kept');
      assert.deepEqual(await chargesByKey(db, k('sql-fail')), {});
    });

    it('charges each key once under concurrent duplicates and clients that give up', async () => {
      const keys = 10;
      const clients = 5;
      const finals = await Promise.all(Array.from({ length: keys * clients }, async (_, i) => {
        const key = k(`storm-${i % keys}`);
        const body = { amount: 100 + (i % keys) };
        for (let attempt = 0; attempt < 300; attempt++) {
          // some clients give up after a few milliseconds, then retry
          const timeout = attempt < 3 && i % 3 === 0 ? 1 + ((i * 7 + attempt) % 20) : 60000;
          try {
            const r = await post('/charges', key, body, { timeout });
            if (r.status !== 409) return [key, r];
            await sleep(5 + (i % 10));
          } catch (e) {
            if (e.name !== 'TimeoutError' && e.name !== 'AbortError') throw e;
          }
        }
        return [key, null];
      }));
      const byKey = new Map();
      for (const [key, r] of finals) {
        assert.ok(r, `${key}: a final answer`);
        assert.equal(r.status, 201, `${key}: ${r.status} ${r.body}`);
        if (!byKey.has(key)) byKey.set(key, new Set());
        byKey.get(key).add(answer(r));
      }
      for (const [key, answers] of byKey) assert.equal(answers.size, 1, `${key}: every client got the same answer`);
      const counts = await chargesByKey(db, k('storm-'));
      assert.equal(Object.keys(counts).length, keys);
      assert.ok(Object.values(counts).every((n) => n === 1), JSON.stringify(counts));
    });

    it('executes the retry of a request whose worker was killed, once', async () => {
      const worker = spawn(process.execPath, [path.join(__dirname, 'app.js'), framework],
        { stdio: ['ignore', 'pipe', 'inherit'] });
      try {
        const base = await new Promise((resolve, reject) => {
          let out = '';
          worker.stdout.on('data', (d) => {
            out += d;
            const m = /listening (\S+)/.exec(out);
            if (m) resolve(m[1]);
          });
          worker.on('exit', (code) => reject(new Error(`the worker exited (${code})`)));
        });
        const lock = await hold(db);
        try {
          const doomed = request(base, '/charges', { key: k('killed'), body: { amount: 321 } })
            .then(() => 'answered', () => 'cut off');
          await waiters(db, 1);
          worker.kill('SIGKILL');
          assert.equal(await doomed, 'cut off');
        } finally {
          await lock.release();
        }
        // its transaction rolls back once its server notices the client is
        // gone; until then the retry is told that the key is in flight
        const r = await settle(() => post('/charges', k('killed'), { amount: 321 }));
        assert.equal(r.status, 201);
        assert.equal(r.header('idempotent-replayed'), undefined, 'the retry executed');
        assert.deepEqual(await chargesByKey(db, k('killed')), { [k('killed')]: 1 });
      } finally {
        worker.kill('SIGKILL');
      }
    });
  });
}

/** Waits until query's n is at least 1 (bounded: 10 s). */
async function waitFor(db, query) {
  const until = Date.now() + 10000;
  for (;;) {
    const { rows: [r] } = await db.query(query);
    if (r.n >= 1) return;
    if (Date.now() > until) throw new Error(`never true: ${query}`);
    await sleep(10);
  }
}
