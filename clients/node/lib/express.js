// The Idempotency-Key middleware as an Express route handler (Express 4 and 5).
'use strict';

const { createHandler, flatLines } = require('./http');

/**
 * An Express handler for an idempotent endpoint: handler(req, ctx) runs once
 * per key, with ctx.client in the transaction that stores its answer (also
 * req.idempotency), and returns { status, headers, body }; or a SQL
 * function's signature ('pay(jsonb)'), which the claim runs in one statement.
 * @param {import('pg').Pool} pool
 * @param {string | (req: any, ctx: { client: import('pg').PoolClient, key: string | undefined,
 *          scope: string }) => Promise<import('./http').Answer> | import('./http').Answer} handler
 * @param {import('./http').Options} [options]
 */
function idempotent(pool, handler, options = {}) {
  const header = options.header ?? 'Idempotency-Key';
  // a string names a SQL function, run under the claim in one statement
  const answer = createHandler(pool, typeof handler === 'string' ? handler : (req, ctx) => {
    req.idempotency = ctx;
    return handler(req, ctx);
  }, options);
  const replayed = options.replayedHeader ?? 'Idempotent-Replayed';
  return async function idempotencyKey(req, res, next) {
    try {
      const a = await answer({
        req,
        key: req.get(header),
        method: req.method,
        path: new URL(req.originalUrl, 'http://localhost').pathname,
        route: req.route ? req.baseUrl + req.route.path : req.baseUrl + req.path,
        body: req.body ?? null,
      });
      // the first answer and every replay leave by the same way
      res.writeHead(a.status, flatLines(a, replayed)).end(a.body);
    } catch (err) {
      next(err);
    }
  };
}

module.exports = { idempotent };
