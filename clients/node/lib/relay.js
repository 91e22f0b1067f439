// An outbox relay (doc/outbox.md): fetch a leased batch and commit the
// lease, publish each message through the caller's function, acknowledge
// what was published with the batch's attempt.  A relay that dies holds its
// batch until the lease runs out; the next fetch hands it out again, and the
// consumers' inboxes turn the second copies away.
'use strict';

const sql = require('./sql');

/**
 * @typedef {object} Message
 * @property {string} messageId
 * @property {string} topic
 * @property {string | null} orderingKey
 * @property {any} payload
 * @property {any} headers
 * @property {Date} sentAt
 * @property {string} attempt the batch's fencing token (a bigint, as text)
 * @property {number} deliveries how many times it was handed out, this time included
 */

/**
 * @typedef {object} RelayOptions
 * @property {number} [batchSize] default 100
 * @property {number | string} [lease] how long a batch is held, default 30 seconds;
 *   choose more than a batch takes to publish
 * @property {[number, number]} [idle] milliseconds to wait when nothing is ready: the first
 *   wait, doubling up to the second (default [200, 5000])
 * @property {[number, number]} [backoff] the same after an error (default [500, 30000])
 * @property {(err: Error, message?: Message) => void} [onError] default: written to stderr
 */

const sleep = (ms, signal) => new Promise((resolve) => {
  if (signal.aborted) return resolve();
  const t = setTimeout(done, ms);
  function done() {
    clearTimeout(t);
    signal.removeEventListener('abort', done);
    resolve();
  }
  signal.addEventListener('abort', done);
});

class Relay {
  /**
   * @param {import('pg').Pool} pool connected as the role that sends
   * @param {(message: Message) => Promise<void> | void} publish resolves once the broker has it
   * @param {RelayOptions} [options]
   */
  constructor(pool, publish, options = {}) {
    this.pool = pool;
    this.publish = publish;
    this.batchSize = options.batchSize ?? 100;
    this.lease = sql.interval(options.lease ?? '30 seconds');
    this.idle = options.idle ?? [200, 5000];
    this.backoff = options.backoff ?? [500, 30000];
    this.onError = options.onError ?? ((err, m) =>
      console.error(`idempotency relay: ${m ? `message "${m.messageId}": ` : ''}${err.message}`));
    this.controller = new AbortController();
  }

  /**
   * One batch: fetch, publish, acknowledge.  A message whose publish fails
   * is not acknowledged; it is handed out again once the lease runs out.
   * @returns {Promise<{ fetched: number, acked: number, failed: number }>}
   */
  async runOnce() {
    const { rows } = await this.pool.query(sql.OUTBOX_FETCH, [this.batchSize, this.lease]);
    if (rows.length === 0) return { fetched: 0, acked: 0, failed: 0 };
    const attempt = rows[0].attempt;
    const published = [];
    let failed = 0;
    // one message per ordering key in a batch, so their order does not
    // matter here; one at a time keeps a slow broker from a burst
    for (const row of rows) {
      const message = {
        messageId: row.message_id, topic: row.topic, orderingKey: row.ordering_key,
        payload: row.payload, headers: row.headers, sentAt: row.sent_at,
        attempt: row.attempt, deliveries: row.deliveries,
      };
      try {
        await this.publish(message);
        published.push(message.messageId);
      } catch (err) {
        failed++;
        this.onError(err, message);
      }
    }
    const acked = await this.ack(attempt, published);
    return { fetched: rows.length, acked, failed };
  }

  /**
   * Acknowledges ids for attempt.  A message another relay took after this
   * batch's lease ran out is refused (IK004, naming it): that relay
   * publishes and acknowledges it, and this one acknowledges the rest.
   * @param {string} attempt
   * @param {string[]} ids
   */
  async ack(attempt, ids) {
    let left = [...ids];
    while (left.length > 0) {
      try {
        const { rows: [r] } = await this.pool.query(sql.OUTBOX_ACK, [attempt, left]);
        return Number(r.acked);
      } catch (err) {
        const taken = err.code === 'IK004' && /does not hold message "(.*)"$/s.exec(err.message);
        if (!taken || !left.includes(taken[1])) throw err;
        left = left.filter((id) => id !== taken[1]);
      }
    }
    return 0;
  }

  /**
   * Runs batches until nothing is ready; rejects if a message could not be
   * published (it stays leased, and a later run publishes it).
   * @returns {Promise<number>} how many messages were acknowledged
   */
  async drain() {
    let total = 0;
    for (;;) {
      const r = await this.runOnce();
      total += r.acked;
      if (r.failed > 0) throw new Error(`${r.failed} message(s) could not be published`);
      if (r.fetched === 0) return total;
    }
  }

  /**
   * Runs until stop(): batch after batch while messages are ready, waiting
   * longer and longer while none is, and after errors.
   */
  async run() {
    const signal = this.controller.signal;
    let idle = this.idle[0];
    let backoff = this.backoff[0];
    while (!signal.aborted) {
      let wait = 0;
      try {
        const r = await this.runOnce();
        if (r.failed > 0) {
          wait = backoff;
          backoff = Math.min(backoff * 2, this.backoff[1]);
        } else if (r.fetched === 0) {
          wait = idle;
          idle = Math.min(idle * 2, this.idle[1]);
        } else {
          idle = this.idle[0];
          backoff = this.backoff[0];
        }
      } catch (err) {
        this.onError(err);
        wait = backoff;
        backoff = Math.min(backoff * 2, this.backoff[1]);
      }
      if (wait > 0) await sleep(wait, signal);
    }
  }

  /** Ends run() after the batch in hand. */
  stop() {
    this.controller.abort();
  }
}

module.exports = { Relay };
