// The IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header)
// on the idempotency extension, as Express middleware.
//
// idempotent(pool, handler) runs handler(client, req) in one transaction
// with the claim and the stored answer (transactional mode): the business
// write commits with the answer or not at all, so no attempt number and no
// clean-up are needed.  handler returns { status, headers, body }; body is
// sent as JSON and stored with the status code and headers, and every retry
// with the same key gets them back byte for byte.
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
        const headers = { 'Content-Type': 'application/json; charset=utf-8', ...answer.headers };
        const body = Buffer.from(JSON.stringify(answer.body));
        await client.query(
          `SELECT idempotency.idempotent_finish($1, NULL, $2, status_code => $3, body => $4,
                                                headers => $5)`,
          [key, scope, answer.status, body, headers]);
        Object.assign(claim, { status_code: answer.status, headers, body });
      }
      await client.query('COMMIT');

      if (claim.outcome === 'in_progress')
        return problem(res, 409, 'a request with this key is in progress', claim.retry_after);
      res.status(claim.status_code).set(claim.headers).send(claim.body);
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
