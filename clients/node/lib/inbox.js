// A consumer under at-least-once delivery (doc/inbox.md): the message id is
// recorded in the transaction that applies the message, so a redelivery
// finds it and changes nothing, and a transaction that rolls back leaves the
// id unseen for the next delivery.
'use strict';

const sql = require('./sql');

/**
 * Runs fn(client) in one transaction with inbox_receive(consumer,
 * messageId), only if the id is new.  Acknowledge the message to the broker
 * after this returns, whatever processed says.
 * @template T
 * @param {import('pg').Pool} pool
 * @param {string} consumer
 * @param {string} messageId
 * @param {(client: import('pg').PoolClient) => Promise<T>} fn
 * @param {{ ttl?: number | string }} [options] how long the id is remembered (default 7 days)
 * @returns {Promise<{ processed: true, result: T } | { processed: false }>}
 */
async function receive(pool, consumer, messageId, fn, options = {}) {
  const client = await pool.connect();
  let broken;
  try {
    const [, { rows: [r] }] = await sql.batch(client, ['BEGIN', options.ttl === undefined
      ? [sql.INBOX_RECEIVE, [consumer, messageId]]
      : [sql.INBOX_RECEIVE_TTL, [consumer, messageId, sql.interval(options.ttl)]]]);
    if (!r.fresh) {
      await client.query('COMMIT');
      return { processed: false };
    }
    const result = await fn(client);
    await client.query('COMMIT');
    return { processed: true, result };
  } catch (err) {
    await client.query('ROLLBACK').catch((e) => { broken = e; });
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * A consumer bound to its name: consume(messageId, ...args) runs
 * fn(client, ...args) once per message id.
 * @param {import('pg').Pool} pool
 * @param {string} name
 * @param {(client: import('pg').PoolClient, ...args: any[]) => Promise<any>} fn
 * @param {{ ttl?: number | string }} [options]
 */
function consumer(pool, name, fn, options) {
  return (messageId, ...args) => receive(pool, name, messageId, (client) => fn(client, ...args), options);
}

module.exports = { receive, consumer };
