// The IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header)
// on the idempotency extension, as Express middleware.
//
// idempotent(pool, handler) runs handler(client, req) in one transaction
// with the claim and the stored answer (transactional mode): the business
// write commits with the answer or not at all, so no attempt number and no
// clean-up are needed.  handler returns { status, headers, body }; body is
// sent as JSON and stored with the status code and headers, and every retry
// with the same key gets them back byte for byte, the header lines in the
// same order.  headers is an object (a value may be an array: one line per
// value) or an array of [name, value] pairs, as idempotent_finish takes them.
'use strict';

// What the extension's errors mean to an HTTP client (doc/errors.md,
// "How an HTTP layer maps idempotent_begin").  Retry-After is in seconds.
const ERRORS = {
  IK001: [422, 'the idempotency key was already used for a different request'],
  '22P02': [400, 'invalid Idempotency-Key header or request body'],
  '40001': [409, 'a concurrent request with the same key; retry', 1],
  '40P01': [409, 'a concurrent request with the same key; retry', 1],
  '55P03': [503, 'the service is being updated; retry', 1],
  '57014': [503, 'the request took too long; retry', 1],
};

function problem(res, status, detail, retryAfter) {
  if (retryAfter) res.set('Retry-After', String(retryAfter));
  res.status(status).json({ error: detail });
}

// The header is a Structured Field string: "abc"; a bare token is accepted too.
function keyOf(req) {
  const raw = req.get('Idempotency-Key');
  if (raw === undefined) return undefined;
  const m = /^"((?:[^"\\]|\\.)*)"$/.exec(raw.trim());
  return m ? m[1].replace(/\\(.)/g, '$1') : raw.trim();
}

// A stored answer's header lines, in their order: an array of pairs as it
// is; an object name by name (jsonb's key order), an array value one line
// per value.
function headerLines(headers) {
  if (Array.isArray(headers)) return headers;
  return Object.entries(headers ?? {}).flatMap(([name, value]) =>
    Array.isArray(value) ? value.map((v) => [name, v]) : [[name, value]]);
}

// The first answer and every replay leave by the same way: writeHead with
// the flat list [name, value, ...] writes the lines exactly in that order
// (setHeader and Express's set and append would group the values of a name).
function sendAnswer(res, status, headers, body) {
  const lines = headerLines(headers);
  if (!lines.some(([name]) => name.toLowerCase() === 'content-length'))
    lines.push(['Content-Length', String(body.length)]);
  res.writeHead(status, lines.flat()).end(body);
}

function idempotent(pool, handler, scope = 'http') {
  return async (req, res) => {
    const key = keyOf(req);
    if (!key) return problem(res, 400, 'this request needs an Idempotency-Key header');

    req.idempotencyKey = key;
    const request = { method: req.method, path: req.path, body: req.body ?? null };
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows: [claim] } = await client.query(
        `SELECT outcome, status_code, headers, body, retry_after
           FROM idempotency.idempotent_begin($1, $2, $3, wait => false)`,
        [key, scope, request]);

      if (claim.outcome === 'execute') {
        const answer = await handler(client, req);
        const headers = [['Content-Type', 'application/json; charset=utf-8'],
                         ...headerLines(answer.headers)];
        const body = Buffer.from(JSON.stringify(answer.body));
        // node-postgres sends an array as a PostgreSQL array: stringify it
        await client.query(
          `SELECT idempotency.idempotent_finish($1, NULL, $2, status_code => $3, body => $4,
                                                headers => $5)`,
          [key, scope, answer.status, body, JSON.stringify(headers)]);
        Object.assign(claim, { status_code: answer.status, headers, body });
      }
      await client.query('COMMIT');

      if (claim.outcome === 'in_progress')
        return problem(res, 409, 'a request with this key is in progress', claim.retry_after);
      sendAnswer(res, claim.status_code, claim.headers, claim.body);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      const known = ERRORS[err.code];
      if (!known) throw err;
      problem(res, ...known);
    } finally {
      client.release();
    }
  };
}

module.exports = { idempotent };
