// The IETF Idempotency-Key draft (draft-ietf-httpapi-idempotency-key-header)
// on the idempotency extension, for any framework: the adapters (express.js,
// fastify.js) only read the request and write the answer.
//
// Transactional mode (the default): one transaction runs idempotent_begin,
// the handler's writes through the client it is handed, and
// idempotent_finish with the answer's status code, header lines and body,
// so the writes commit with the stored answer or not at all; an answer that
// is not stored (5xx by default) rolls the writes and the claim back, and a
// retry executes.  External mode: the claim commits first and the handler
// works in steps (external.js).  One-statement mode: the handler is a SQL
// function, which idempotent_call runs under the claim in one statement,
// one round trip.
'use strict';

const sql = require('./sql');
const { mapError, ClaimLostError } = require('./errors');
const { runExternal } = require('./external');

/**
 * @typedef {object} Answer what a handler returns
 * @property {number} [status] default 200
 * @property {Record<string, string | string[]> | Array<[string, string]>} [headers]
 *   an object (an array value: one line per value) or [name, value] pairs in their order
 * @property {any} [body] a Buffer or a string is sent as it is, anything else as JSON
 */

/**
 * @typedef {object} Options
 * @property {string | ((req: any) => string)} [scope] default "METHOD /route/:pattern"
 * @property {(req: any) => any} [fingerprint] the request a reused key must match
 *   (JSON); default { method, path, body }
 * @property {boolean} [required] a request without a key: true (default) 400, false
 *   the handler runs without a claim
 * @property {(status: number) => boolean} [store] which answers are stored; default not 5xx
 * @property {number | string | null} [maxWait] how long a duplicate waits for a request in
 *   flight before its 409: 0 (default) not at all; milliseconds or an interval; null the
 *   server's idempotency.max_wait
 * @property {number | string} [ttl] how long an answer is kept (default the extension's, 24 hours)
 * @property {string | false} [replayedHeader] the header that marks a replay,
 *   default Idempotent-Replayed; false: none, a replay is the first answer exactly
 * @property {string} [header] the request header, default Idempotency-Key
 * @property {boolean | { lease?: number, renewEvery?: number }} [external] external mode
 */

/**
 * The header is a Structured Field string ("abc"); a bare token is
 * accepted too.
 * @param {string | string[] | undefined} raw
 * @returns {string | undefined}
 */
function parseKey(raw) {
  if (Array.isArray(raw)) raw = raw[0];
  if (raw === undefined) return undefined;
  const m = /^"((?:[^"\\]|\\.)*)"$/.exec(raw.trim());
  return m ? m[1].replace(/\\(.)/g, '$1') : raw.trim();
}

/**
 * A stored answer's header lines, in their order, from any of the three
 * forms idempotent_finish takes: an array of pairs as it is; an object name
 * by name (jsonb's key order), an array value one line per value.
 * @param {any} headers
 * @returns {Array<[string, string]>}
 */
function headerLines(headers) {
  if (Array.isArray(headers)) return headers.map(([name, value]) => [String(name), String(value)]);
  return Object.entries(headers ?? {}).flatMap(([name, value]) =>
    Array.isArray(value) ? value.map((v) => [name, String(v)]) : [[name, String(value)]]);
}

const has = (lines, name) => lines.some(([n]) => n.toLowerCase() === name);

/**
 * A handler's answer as it is stored and sent: the status, its header
 * lines in order (a Content-Type for a body that is not bytes) and the body
 * as bytes.
 * @param {Answer} answer
 * @returns {{ status: number, lines: Array<[string, string]>, body: Buffer }}
 */
function render(answer) {
  const { status = 200, headers, body } = answer ?? {};
  const lines = headerLines(headers);
  let bytes;
  let type;
  if (body === undefined || body === null) bytes = Buffer.alloc(0);
  else if (Buffer.isBuffer(body)) bytes = body;
  else if (typeof body === 'string') [bytes, type] = [Buffer.from(body), 'text/plain; charset=utf-8'];
  else [bytes, type] = [Buffer.from(JSON.stringify(body)), 'application/json; charset=utf-8'];
  if (type && !has(lines, 'content-type')) lines.unshift(['Content-Type', type]);
  return { status, lines, body: bytes };
}

/** An answer of the middleware's own (an error), not stored. */
function problem(status, message, retryAfter) {
  const a = render({ status, body: { error: message } });
  if (retryAfter) a.lines.push(['Retry-After', String(retryAfter)]);
  return a;
}

/**
 * The lines to write: the stored ones, the replay's mark, and a
 * Content-Length unless the answer has one.
 * @param {{ status: number, lines: Array<[string, string]>, body: Buffer, replayed?: boolean }} a
 * @param {string | false} replayedHeader
 * @returns {string[]} [name, value, name, value, ...] for writeHead, which writes
 *   the lines exactly in that order (setHeader would group the values of a name)
 */
function flatLines(a, replayedHeader) {
  const lines = [...a.lines];
  if (a.replayed && replayedHeader) lines.push([replayedHeader, 'true']);
  if (!has(lines, 'content-length')) lines.push(['Content-Length', String(a.body.length)]);
  return lines.flat();
}

/**
 * The answer of a replay, from idempotent_begin's row.
 * @param {any} claim
 */
function replayOf(claim) {
  let body = claim.body;
  let lines = headerLines(claim.headers);
  if (body === null && claim.response !== null) {
    // a record stored with a JSON response only (by another writer)
    body = Buffer.from(JSON.stringify(claim.response));
    if (!has(lines, 'content-type')) lines = [['Content-Type', 'application/json; charset=utf-8'], ...lines];
  }
  return { status: claim.status_code ?? 200, lines, body: body ?? Buffer.alloc(0), replayed: true };
}

/**
 * @typedef {object} Incoming a request, as the adapters read it
 * @property {any} req the framework's request, handed to the handler
 * @property {string | string[] | undefined} key the raw header
 * @property {string} method
 * @property {string} path without the query
 * @property {string} route the route's pattern (/charges/:id)
 * @property {any} body
 */

/**
 * The framework-independent middleware: answers a request, or throws an
 * error for the framework's error handler (a bug in the handler, an error
 * of the database that is not the client's to retry).
 * @param {import('pg').Pool} pool
 * @param {(req: any, ctx: any) => Promise<Answer> | Answer} handler
 * @param {Options} [options]
 * @returns {(incoming: Incoming) => Promise<{ status: number, lines: Array<[string, string]>,
 *                                              body: Buffer, replayed?: boolean }>}
 */
function createHandler(pool, handler, options = {}) {
  if (typeof handler === 'string') return createCallHandler(pool, handler, options);
  const store = options.store ?? ((status) => status < 500);
  const fingerprint = options.fingerprint ??
    ((req, incoming) => ({ method: incoming.method, path: incoming.path, body: bodyOf(incoming.body) }));
  const scopeOf = typeof options.scope === 'function' ? options.scope
    : options.scope !== undefined ? () => options.scope
      : (req, incoming) => `${incoming.method} ${incoming.route}`;
  const external = options.external ? { lease: 30000, ...(options.external === true ? {} : options.external) } : null;
  const begin = sql.beginStatement({ ttl: options.ttl, maxWait: options.maxWait ?? 0 });
  const required = options.required ?? true;

  return async function answer(incoming) {
    const key = parseKey(incoming.key);
    if (!key && required)
      return problem(400, `this request needs an ${options.header ?? 'Idempotency-Key'} header`);
    const scope = scopeOf(incoming.req, incoming);
    const request = fingerprint(incoming.req, incoming);
    if (key && external) return answerExternal(key, scope, request, incoming);

    const client = await pool.connect();
    let broken;
    let inHandler = false;
    try {
      let claim = null;
      if (!key) await client.query('BEGIN');
      else {
        const [, { rows }] = await sql.batch(client, ['BEGIN', [begin.text, begin.values({ key, scope, request })]]);
        claim = rows[0];
        if (claim.outcome !== 'execute') {
          await client.query('COMMIT');
          return claim.outcome === 'replay' ? replayOf(claim)
            : problem(409, 'a request with this idempotency key is in progress', claim.retry_after);
        }
      }
      inHandler = true;
      const ctx = { client, key, scope, attempt: claim ? claim.attempt : null };
      const a = render(await handler(incoming.req, ctx));
      if (!store(a.status)) {
        await client.query('ROLLBACK');
        return a;
      }
      const finish = key ? [[sql.FINISH, sql.finishValues({ key, scope, status: a.status,
        headers: a.lines, body: a.body })]] : [];
      await sql.batch(client, [...finish, 'COMMIT']);
      return a;
    } catch (err) {
      await client.query('ROLLBACK').catch((e) => { broken = e; });
      const known = mapError(err, !inHandler);
      if (!known) throw err;
      return problem(...known);
    } finally {
      client.release(broken);
    }
  };

  async function answerExternal(key, scope, request, incoming) {
    let r;
    let started = false;
    try {
      r = await runExternal(pool, {
        ...external, key, scope, request, ttl: options.ttl, maxWait: options.maxWait ?? 0,
        toFinish: (a) => (store(a.status) ? { status: a.status, headers: a.lines, body: a.body } : null),
      }, async (work) => {
        started = true;
        return render(await handler(incoming.req, work));
      });
    } catch (err) {
      // a worker whose claim was taken over: the new owner answers the retry
      if (err instanceof ClaimLostError) return problem(409, 'the request was taken over; retry', 1);
      const known = mapError(err, !started);
      if (!known) throw err;
      return problem(...known);
    }
    if (r.outcome === 'replay') return replayOf(r.claim);
    if (r.outcome === 'in_progress')
      return problem(409, 'a request with this idempotency key is in progress', r.claim.retry_after);
    return r.answer;
  }
}

/**
 * The one-statement mode: handler names a SQL function of one jsonb
 * argument returning jsonb ('pay(jsonb)'), which idempotent_call runs under
 * the claim with the request ({ key, method, path, body } by default, or
 * what options.fingerprint gives), and finishes the key with what it
 * returns: an answer { status, headers, body } (an object with no other
 * member), or anything else as the body of a 200.  The stored answer is
 * that JSON, rendered alike for the first answer and every replay.  The
 * function decides what is stored: an answer it returns is kept, 5xx too;
 * an error it raises rolls the claim back, and a retry executes.
 * @param {import('pg').Pool} pool
 * @param {string} handler
 * @param {Options} options
 */
function createCallHandler(pool, handler, options) {
  if (options.external) throw new TypeError('external mode runs a JavaScript handler, not a SQL function');
  if (options.required === false) throw new TypeError('a SQL handler runs under a key: required must be true');
  if (options.store) throw new TypeError('a SQL handler decides what is stored: it raises an error for an answer that must not be');
  const fingerprint = options.fingerprint ??
    ((req, incoming) => ({ key: incoming.key, method: incoming.method, path: incoming.path, body: bodyOf(incoming.body) }));
  const scopeOf = typeof options.scope === 'function' ? options.scope
    : options.scope !== undefined ? () => options.scope
      : (req, incoming) => `${incoming.method} ${incoming.route}`;
  // maxWait 0, as in the transactional mode: a 409 at once
  const call = sql.callStatement(handler, { ttl: options.ttl, maxWait: options.maxWait ?? 0 });
  // the function's own errors name it in their context; the claim's do not
  const name = handler.replace(/\(.*$/s, '').replace(/^.*\./, '').replace(/"/g, '').toLowerCase();
  const fromHandler = (err) => typeof err.where === 'string' && err.where.toLowerCase().includes(name);

  return async function answer(incoming) {
    const key = parseKey(incoming.key);
    if (!key) return problem(400, `this request needs an ${options.header ?? 'Idempotency-Key'} header`);
    const scope = scopeOf(incoming.req, incoming);
    const request = fingerprint(incoming.req, { ...incoming, key });
    let row;
    try {
      ({ rows: [row] } = await pool.query(call.text, call.values({ key, scope, request })));
    } catch (err) {
      const known = mapError(err, !fromHandler(err));
      if (!known) throw err;
      return problem(...known);
    }
    if (row.outcome === 'in_progress')
      return problem(409, 'a request with this idempotency key is in progress', row.retry_after);
    const a = render(answerOf(row.response));
    return row.outcome === 'replay' ? { ...a, replayed: true } : a;
  };
}

/**
 * A SQL handler's answer: { status, headers, body }, or any other JSON as
 * the body of a 200.
 * @param {any} response
 * @returns {Answer}
 */
function answerOf(response) {
  const members = ['status', 'headers', 'body'];
  if (response !== null && typeof response === 'object' && !Array.isArray(response) &&
      Object.keys(response).length > 0 && Object.keys(response).every((m) => members.includes(m)))
    return response;
  return { status: 200, body: response };
}

/**
 * The request body as JSON for its fingerprint: a parsed body as it is, raw
 * bytes as base64.
 * @param {any} body
 */
function bodyOf(body) {
  if (body === undefined) return null;
  if (Buffer.isBuffer(body)) return { base64: body.toString('base64') };
  return body;
}

module.exports = { createHandler, parseKey, headerLines, render, flatLines };
