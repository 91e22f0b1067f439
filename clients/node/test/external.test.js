// Work outside the database: a committed claim, steps recorded as recovery
// points, a take-over after the lease ran out that resumes after the last
// recorded step, fencing of the worker that lost its claim, and lease
// renewal while the work runs.
'use strict';

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const { runExternal, ClaimLostError, express } = require('..');
const { run, pool, request, answer, sleep } = require('./helpers');

const db = pool();
const k = (name) => `ext-${run}-${name}`;
after(() => db.end());

/** A promise and the function that settles it. */
function gate() {
  let open;
  const p = new Promise((resolve) => { open = resolve; });
  return { wait: p, open };
}

async function record(key) {
  const { rows: [r] } = await db.query(`SELECT status, recovery_point, recovery_state, response, attempt
      FROM idempotency.my_records WHERE key = $1 AND scope = 'payments'`, [key]);
  return r;
}

/** Waits until the claim's lease has run out (bounded: 20 s). */
async function stalled(key) {
  const until = Date.now() + 20000;
  for (;;) {
    const { rows: [r] } = await db.query(
      'SELECT count(*)::int AS n FROM idempotency.my_stalled_claims WHERE key = $1', [key]);
    if (r.n === 1) return;
    if (Date.now() > until) throw new Error(`the lease of ${key} did not run out`);
    await sleep(50);
  }
}

describe('external work', () => {
  it('records each step, stores the answer with the attempt, and replays it', async () => {
    const key = k('steps');
    const calls = [];
    const r = await runExternal(db, { key, scope: 'payments', request: { amount: 10 } }, async (work) => {
      const customer = await work.step('customer', () => { calls.push('customer'); return { id: 'cus_1' }; });
      const charge = await work.step('charge', () => { calls.push('charge'); return `ch_${customer.id}`; });
      return { charge };
    });
    assert.equal(r.outcome, 'completed');
    assert.deepEqual(calls, ['customer', 'charge']);
    const rec = await record(key);
    assert.equal(rec.status, 'completed');
    assert.equal(rec.recovery_point, 'charge');
    assert.deepEqual(rec.recovery_state, { steps: { customer: { id: 'cus_1' }, charge: 'ch_cus_1' } });
    assert.deepEqual(rec.response, { charge: 'ch_cus_1' });
    const again = await runExternal(db, { key, scope: 'payments', request: { amount: 10 } },
      () => assert.fail('a replay runs nothing'));
    assert.equal(again.outcome, 'replay');
    assert.deepEqual(again.claim.response, { charge: 'ch_cus_1' });
  });

  it('answers in_progress to a duplicate while the work runs', async () => {
    const key = k('busy');
    const g = gate();
    const started = gate();
    const first = runExternal(db, { key, scope: 'payments' }, async () => {
      started.open();
      await g.wait;
      return { ok: true };
    });
    await Promise.race([started.wait, first]);
    const dup = await runExternal(db, { key, scope: 'payments' }, () => assert.fail('not twice'));
    assert.equal(dup.outcome, 'in_progress');
    assert.ok(dup.claim.retry_after >= 1);
    g.open();
    assert.equal((await first).outcome, 'completed');
  });

  it('resumes a take-over after the last recorded step, and fences off the worker that lost its claim', async () => {
    const key = k('takeover');
    const provider = { customer: 0, charge: 0 };
    const stuck = gate();
    const atStep2 = gate();
    // the first worker records its first step, then hangs in its second
    // (a lease of a second, never renewed: it looks dead)
    const first = runExternal(db, { key, scope: 'payments', lease: 1000, renewEvery: 0 }, async (work) => {
      await work.step('customer', () => { provider.customer++; return 'cus_1'; });
      await work.step('charge', async () => {
        atStep2.open();
        await stuck.wait;
        return 'ch_stale';
      });
      return { charge: 'ch_stale' };
    });
    await Promise.race([atStep2.wait, first]);
    await stalled(key);
    const second = await runExternal(db, { key, scope: 'payments', lease: 30000 }, async (work) => {
      assert.equal(work.previousEnd, 'lease_expired');
      assert.equal(work.recoveryPoint, 'customer');
      const customer = await work.step('customer', () => { provider.customer++; return 'cus_2'; });
      const charge = await work.step('charge', () => { provider.charge++; return `ch_${customer}`; });
      await work.finish({ response: { charge } }, async (client) => {
        await client.query('INSERT INTO receipts VALUES ($1, $2)', [key, charge]);
      });
      return { charge };
    });
    assert.equal(second.outcome, 'completed');
    assert.deepEqual(provider, { customer: 1, charge: 1 }, 'the recorded step did not run again');
    stuck.open();
    await assert.rejects(first, (err) => err instanceof ClaimLostError && err.code === 'IK004');
    const rec = await record(key);
    assert.deepEqual(rec.response, { charge: 'ch_cus_1' }, 'the new owner\'s answer stands');
    const { rows } = await db.query('SELECT charge FROM receipts WHERE idempotency_key = $1', [key]);
    assert.deepEqual(rows, [{ charge: 'ch_cus_1' }]);
  });

  it('renews the lease while the work runs', async () => {
    const key = k('renew');
    let renewals = 0;
    const renewed = gate();
    const leases = [];
    const r = await runExternal(db, {
      key, scope: 'payments', lease: 60000, renewEvery: 50,
      onRenew: (until) => { leases.push(until); if (++renewals === 3) renewed.open(); },
      onRenewError: (err) => renewed.open(err),
    }, async () => {
      const err = await renewed.wait;
      if (err) throw err;
      return { done: true };
    });
    assert.equal(r.outcome, 'completed');
    assert.ok(leases[2] > leases[0], 'each renewal moves the lease on');
  });

  it('gives the claim up when the work fails before any step, so a retry executes at once', async () => {
    const key = k('abandon');
    await assert.rejects(runExternal(db, { key, scope: 'payments' }, async () => {
      throw new Error('the provider is down');
    }), /the provider is down/);
    const r = await runExternal(db, { key, scope: 'payments' }, (work) => {
      assert.equal(work.previousEnd, 'abandoned');
      return { ok: true };
    });
    assert.equal(r.outcome, 'completed');
  });

  it('serves an endpoint in external mode: steps, then the answer stored and replayed', async () => {
    const app = require('express')();
    app.use(require('express').json());
    let calls = 0;
    app.post('/payments', express(db, async (req, work) => {
      const charge = await work.step('charge', () => { calls++; return `ch_${req.body.amount}`; });
      return { status: 201, headers: [['Location', `/payments/${charge}`]], body: { charge } };
    }, { external: { lease: 30000 }, scope: 'payments' }));
    const server = await new Promise((resolve) => { const s = app.listen(0, '127.0.0.1', () => resolve(s)); });
    try {
      const base = `http://127.0.0.1:${server.address().port}`;
      const first = await request(base, '/payments', { key: k('http'), body: { amount: 5 } });
      const again = await request(base, '/payments', { key: k('http'), body: { amount: 5 } });
      assert.equal(first.status, 201);
      assert.equal(again.header('idempotent-replayed'), 'true');
      assert.equal(answer(again), answer(first));
      assert.equal(calls, 1);
      assert.equal((await record(k('http'))).recovery_point, 'charge');
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
