// The extension's SQL API as this package calls it: every statement once,
// with the arguments named, so that the C and the portable edition (which
// share the signatures) are called alike.
'use strict';

/**
 * An interval for PostgreSQL: a number is milliseconds, a string is sent as
 * it is ('30 seconds').
 * @param {number | string | null | undefined} value
 * @returns {string | null}
 */
function interval(value) {
  if (value === undefined || value === null) return null;
  if (typeof value === 'number') {
    if (!Number.isFinite(value) || value < 0) throw new RangeError(`not a duration: ${value}`);
    return `${Math.round(value)} milliseconds`;
  }
  return String(value);
}

/**
 * The idempotent_begin statement for a set of options.  Options left out are
 * not named, so the extension's defaults (and its settings, such as
 * idempotency.max_wait) apply.
 * @param {{ ttl?: number | string, maxWait?: number | string | null,
 *           lease?: number | string, external?: boolean }} options
 * @returns {{ text: string, values: (p: { key: string, scope: string, request: any }) => any[] }}
 */
function beginStatement(options) {
  const args = ['$1', '$2', '$3::jsonb'];
  const extra = [];
  const add = (name, value, type) => {
    extra.push(value);
    args.push(`${name} => $${3 + extra.length}::${type}`);
  };
  if (options.ttl !== undefined) add('ttl', interval(options.ttl), 'interval');
  if (options.lease !== undefined) add('lease', interval(options.lease), 'interval');
  // maxWait 0 is "do not wait": an answer of 409 at once, which gives a
  // pooled connection back at once (doc/drivers.md, PgBouncer)
  if (options.maxWait === 0) add('wait', false, 'boolean');
  else if (options.maxWait !== null && options.maxWait !== undefined)
    add('max_wait', interval(options.maxWait), 'interval');
  if (options.external) add('external', true, 'boolean');
  return {
    text: `SELECT outcome, status, response, attempt, status_code, headers, body, retry_after,
                  previous_attempt, previous_end, recovery_point, recovery_state
             FROM idempotency.idempotent_begin(${args.join(', ')})`,
    // node-postgres sends a JavaScript array as a PostgreSQL array, not as
    // JSON: the request is always sent as JSON text
    values: ({ key, scope, request }) =>
      [key, scope, request === undefined ? null : JSON.stringify(request), ...extra],
  };
}

/**
 * The idempotent_call statement for a set of options: the claim, the SQL
 * handler and the finish in one statement, which is its own transaction
 * (autocommit), one round trip.
 * @param {string} handler the function's signature, such as 'pay(jsonb)'
 * @param {{ ttl?: number | string, maxWait?: number | string | null }} options
 * @returns {{ text: string, values: (p: { key: string, scope: string, request: any }) => any[] }}
 */
function callStatement(handler, options) {
  const args = ['$1', '$2::regprocedure', '$3::jsonb', '$4'];
  const extra = [];
  const add = (name, value, type) => {
    extra.push(value);
    args.push(`${name} => $${4 + extra.length}::${type}`);
  };
  if (options.ttl !== undefined) add('ttl', interval(options.ttl), 'interval');
  if (options.maxWait !== null && options.maxWait !== undefined)
    add('max_wait', interval(options.maxWait), 'interval');
  return {
    text: `SELECT outcome, response, retry_after FROM idempotency.idempotent_call(${args.join(', ')})`,
    values: ({ key, scope, request }) =>
      [key, handler, request === undefined ? null : JSON.stringify(request), scope, ...extra],
  };
}

const FINISH = `SELECT idempotency.idempotent_finish($1, $2::jsonb, $3, attempt => $4::int,
                    status_code => $5::int, body => $6::bytea, headers => $7::jsonb) AS status`;

/**
 * idempotent_finish's parameters.  attempt may be null inside the claim's
 * own transaction, where it is implied.
 * @param {{ key: string, scope: string, attempt?: number | null,
 *           response?: any, status?: number | null, headers?: any, body?: Buffer | null }} a
 */
function finishValues(a) {
  return [a.key, a.response === undefined || a.response === null ? null : JSON.stringify(a.response),
    a.scope, a.attempt ?? null, a.status ?? null, a.body ?? null,
    a.headers === undefined || a.headers === null ? null : JSON.stringify(a.headers)];
}

const ABANDON = 'SELECT idempotency.idempotent_abandon($1, $2, attempt => $3::int)';
const CHECKPOINT = `SELECT idempotency.idempotent_checkpoint($1, $2, $3::jsonb, $4, attempt => $5::int)`;
const RENEW = 'SELECT idempotency.idempotent_renew($1, $2::interval, $3, attempt => $4::int) AS lease_until';
const INBOX_RECEIVE = 'SELECT idempotency.inbox_receive($1, $2) AS fresh';
const INBOX_RECEIVE_TTL = 'SELECT idempotency.inbox_receive($1, $2, $3::interval) AS fresh';
const OUTBOX_FETCH = `SELECT message_id, topic, ordering_key, payload, headers, sent_at, attempt::text, deliveries
                        FROM idempotency.outbox_fetch($1::int, $2::interval)`;
const OUTBOX_ACK = 'SELECT idempotency.outbox_ack($1::bigint, $2::text[]) AS acked';

/**
 * Runs queries on one client and gives their results in order, or throws the
 * first one's error.  node-postgres 8.23 and later writes them all without
 * waiting for each answer (its pipeline mode: every query ends with its own
 * Sync, so in a transaction they run as if sent in turn, and after an error
 * the rest fail or, a COMMIT, roll back), which saves the round trip of a
 * BEGIN before a call and of a COMMIT after one; an older node-postgres runs
 * them in turn.  Pipeline mode is turned on only while these are in flight:
 * in it node-postgres refuses cursors, which a handler may use.
 * @param {import('pg').ClientBase} client
 * @param {Array<string | [string, any[]]>} queries
 * @returns {Promise<import('pg').QueryResult[]>}
 */
async function batch(client, queries) {
  const calls = queries.map((q) => (typeof q === 'string' ? [q] : q));
  if (!('pipeline' in client) || calls.length < 2) {
    const results = [];
    for (const [text, values] of calls) results.push(await client.query(text, values));
    return results;
  }
  const was = client.pipeline;
  client.pipeline = true;
  // node-postgres writes each protocol message on its own; corked, the
  // socket sends the batch in one write
  const stream = client.connection && client.connection.stream;
  const corked = stream && typeof stream.cork === 'function';
  let settled;
  try {
    if (corked) stream.cork();
    let sent;
    try {
      sent = calls.map(([text, values]) => client.query(text, values));
    } finally {
      if (corked) stream.uncork();
    }
    settled = await Promise.allSettled(sent);
  } finally {
    client.pipeline = was;
  }
  const failed = settled.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((r) => r.value);
}

module.exports = {
  batch, interval, beginStatement, callStatement, FINISH, finishValues, ABANDON, CHECKPOINT, RENEW,
  INBOX_RECEIVE, INBOX_RECEIVE_TTL, OUTBOX_FETCH, OUTBOX_ACK,
};
