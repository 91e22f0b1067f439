// The consumer helper: the user's function runs only for a new message id,
// in the transaction that records the id.
'use strict';

const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const { receive, consumer } = require('..');
const { run, pool } = require('./helpers');

const db = pool();
const id = (name) => `msg-${run}-${name}`;
after(() => db.end());

async function invoices(messageId) {
  const { rows: [r] } = await db.query('SELECT count(*)::int AS n FROM invoices WHERE message_id = $1', [messageId]);
  return r.n;
}

const apply = (messageId, amount) => async (client) => {
  await client.query('INSERT INTO invoices VALUES ($1, $2)', [messageId, amount]);
  return amount;
};

describe('inbox consumer', () => {
  it('runs the function for a new message, not for a redelivery', async () => {
    const m = id('once');
    assert.deepEqual(await receive(db, 'billing', m, apply(m, 10)), { processed: true, result: 10 });
    assert.deepEqual(await receive(db, 'billing', m, () => assert.fail('a redelivery runs nothing')),
      { processed: false });
    assert.equal(await invoices(m), 1);
    // another consumer has inbox entries of its own
    assert.equal((await receive(db, 'shipping', m, async () => 'shipped')).processed, true);
  });

  it('rolls the id back with the function\'s writes when it fails, so the next delivery runs', async () => {
    const m = id('fails');
    await assert.rejects(receive(db, 'billing', m, async (client) => {
      await apply(m, 20)(client);
      throw new Error('the message cannot be applied yet');
    }), /cannot be applied yet/);
    assert.equal(await invoices(m), 0);
    assert.equal((await receive(db, 'billing', m, apply(m, 20), { ttl: '1 day' })).processed, true);
    assert.equal(await invoices(m), 1);
  });

  it('applies a message delivered to several consumers at once exactly once', async () => {
    const m = id('concurrent');
    const consume = consumer(db, 'billing', (client, amount) => apply(m, amount)(client));
    const results = await Promise.all(Array.from({ length: 8 }, () => consume(m, 30)));
    assert.equal(results.filter((r) => r.processed).length, 1);
    assert.equal(await invoices(m), 1);
  });
});
