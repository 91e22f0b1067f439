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

module.exports = {
  interval, beginStatement, FINISH, finishValues, ABANDON, CHECKPOINT, RENEW,
  INBOX_RECEIVE, INBOX_RECEIVE_TTL, OUTBOX_FETCH, OUTBOX_ACK,
};
