// The outbox relay, as a library and as a command: every message sent is
// published and acknowledged, one ordering key's messages in order; a
// message that could not be published is published again; a late
// acknowledgement of a message another relay took is fenced off.
'use strict';

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFile } = require('node:child_process');
const { Relay } = require('..');
const { run, pool, sleep } = require('./helpers');

const db = pool();
after(() => db.end());
let n = 0;
const mid = (name) => `out-${run}-${name}-${n++}`;

/** Sends messages in one transaction: [[messageId, orderingKey], ...]. */
async function send(messages) {
  const c = await db.connect();
  try {
    await c.query('BEGIN');
    for (const [messageId, orderingKey] of messages)
      await c.query(`SELECT idempotency.outbox_send('orders', $1::jsonb, $2, message_id => $3)`,
        [JSON.stringify({ id: messageId }), orderingKey, messageId]);
    await c.query('COMMIT');
  } finally {
    c.release();
  }
}

const into = (m) => db.query('INSERT INTO published (message_id, topic, ordering_key, payload, attempt) VALUES ($1, $2, $3, $4, $5)',
  [m.messageId, m.topic, m.orderingKey, JSON.stringify(m.payload), m.attempt]);

async function states(ids) {
  const { rows } = await db.query(`SELECT message_id, state FROM idempotency.my_outbox
      WHERE message_id = ANY ($1) ORDER BY message_id`, [ids]);
  return Object.fromEntries(rows.map((r) => [r.message_id, r.state]));
}

async function publications(ids) {
  const { rows } = await db.query(`SELECT message_id, ordering_key FROM published
      WHERE message_id = ANY ($1) ORDER BY at, message_id`, [ids]);
  return rows;
}

const delivered = (ids) => Object.fromEntries([...ids].sort().map((i) => [i, 'delivered']));

describe('outbox relay', () => {
  it('publishes and acknowledges every message, one ordering key\'s in order', async () => {
    const a = [mid('a'), mid('a'), mid('a')];
    const b = [mid('b'), mid('b')];
    const keyA = `a-${run}`;
    const keyB = `b-${run}`;
    await send([[a[0], keyA], [b[0], keyB], [a[1], keyA], [b[1], keyB], [a[2], keyA]]);
    const relay = new Relay(db, into, { batchSize: 10 });
    assert.ok(await relay.drain() >= 5);
    const ids = [...a, ...b];
    assert.deepEqual(await states(ids), delivered(ids));
    const pubs = await publications(ids);
    assert.equal(pubs.length, 5, 'each published once');
    assert.deepEqual(pubs.filter((p) => p.ordering_key === keyA).map((p) => p.message_id), a);
    assert.deepEqual(pubs.filter((p) => p.ordering_key === keyB).map((p) => p.message_id), b);
  });

  it('publishes a message again when its publish failed, once its lease ran out', async () => {
    const m = mid('retry');
    await send([[m, null]]);
    let failures = 0;
    const relay = new Relay(db, async (msg) => {
      if (msg.messageId === m && failures++ === 0) throw new Error('the broker is down');
      await into(msg);
    }, { lease: 500, onError: () => {} });
    await assert.rejects(relay.drain(), /could not be published/);
    assert.deepEqual(await states([m]), { [m]: 'leased' });
    const until = Date.now() + 20000;
    while ((await states([m]))[m] !== 'delivered') {
      assert.ok(Date.now() < until, 'published within 20 s');
      await relay.runOnce();
      await sleep(50);
    }
    assert.equal((await publications([m])).length, 1);
  });

  it('is fenced off, without failing, when another relay took its messages after the lease ran out', async () => {
    const m = mid('late');
    const other = mid('late-other');
    await send([[m, null], [other, null]]);
    const late = new Relay(db, into);
    // the late relay's batch, published but not yet acknowledged
    const { rows } = await db.query(`SELECT message_id, attempt::text FROM idempotency.outbox_fetch(100, '500 milliseconds')
        WHERE message_id = ANY ($1)`, [[m, other]]);
    assert.equal(rows.length, 2);
    // its lease runs out, and another relay takes both and acknowledges m
    const until = Date.now() + 20000;
    let taken = [];
    while (taken.length < 2) {
      assert.ok(Date.now() < until, 'the lease ran out within 20 s');
      await sleep(100);
      ({ rows: taken } = await db.query(`SELECT attempt::text FROM idempotency.outbox_fetch(100, '1 minute')
          WHERE message_id = ANY ($1)`, [[m, other]]));
    }
    await db.query('SELECT idempotency.outbox_ack($1::bigint, ARRAY[$2])', [taken[0].attempt, m]);
    assert.deepEqual(await states([m, other]), { [m]: 'delivered', [other]: 'leased' });
    // the late acknowledgement: each message is refused in turn (IK004),
    // and nothing is acknowledged under the new owner's feet
    assert.equal(await late.ack(rows[0].attempt, [m, other]), 0);
    assert.deepEqual(await states([m, other]), { [m]: 'delivered', [other]: 'leased' });
    assert.equal(await late.ack(taken[0].attempt, [other]), 1, 'the new owner acknowledges the rest');
  });

  it('runs until stopped, waiting while nothing is ready', async () => {
    const m = mid('loop');
    const seen = [];
    const relay = new Relay(db, (msg) => { seen.push(msg.messageId); }, { idle: [20, 100] });
    const running = relay.run();
    await send([[m, null]]);
    const until = Date.now() + 20000;
    while (!seen.includes(m)) {
      assert.ok(Date.now() < until, 'published within 20 s');
      await sleep(20);
    }
    relay.stop();
    await running;
    assert.deepEqual(await states([m]), { [m]: 'delivered' });
  });

  it('runs as a command with the publish function from a module', async () => {
    const ids = [mid('cli'), mid('cli')];
    await send([[ids[0], `cli-${run}`], [ids[1], `cli-${run}`]]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'relay-'));
    const out = path.join(dir, 'published.jsonl');
    fs.writeFileSync(path.join(dir, 'publish.js'), `
      const fs = require('node:fs');
      module.exports = async (m) => fs.appendFileSync(${JSON.stringify(out)}, JSON.stringify(m.messageId) + '\\n');
    `);
    const bin = path.join(__dirname, '..', 'bin', 'idempotency-relay.js');
    const { stderr } = await new Promise((resolve, reject) =>
      execFile(process.execPath, [bin, '--once', '--batch-size', '5', path.join(dir, 'publish.js')],
        { timeout: 60000 }, (err, stdout, stderr) => (err ? reject(Object.assign(err, { stderr })) : resolve({ stderr }))));
    assert.match(stderr, /message\(s\) published/);
    const lines = fs.readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.filter((l) => ids.includes(l)), ids);
    assert.deepEqual(await states(ids), delivered(ids));
    fs.rmSync(dir, { recursive: true });
  });
});
