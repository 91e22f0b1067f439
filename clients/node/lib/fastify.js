// The Idempotency-Key middleware as a Fastify route handler (Fastify 4 and 5).
'use strict';

const { createHandler, flatLines } = require('./http');

/**
 * A Fastify handler for an idempotent endpoint: handler(request, ctx) runs
 * once per key, with ctx.client in the transaction that stores its answer
 * (also request.idempotency), and returns { status, headers, body }, or a SQL
 * function's signature ('pay(jsonb)'), which the claim runs in one statement.  The
 * answer is written to the raw response (reply.hijack()), so that its header
 * lines go out in their order: Fastify's onSend hooks do not see it.
 * @param {import('pg').Pool} pool
 * @param {string | (request: any, ctx: { client: import('pg').PoolClient, key: string | undefined,
 *          scope: string }) => Promise<import('./http').Answer> | import('./http').Answer} handler
 * @param {import('./http').Options} [options]
 */
function idempotent(pool, handler, options = {}) {
  const header = (options.header ?? 'Idempotency-Key').toLowerCase();
  // a string names a SQL function, run under the claim in one statement
  const answer = createHandler(pool, typeof handler === 'string' ? handler : (request, ctx) => {
    request.idempotency = ctx;
    return handler(request, ctx);
  }, options);
  const replayed = options.replayedHeader ?? 'Idempotent-Replayed';
  return async function idempotencyKey(request, reply) {
    const a = await answer({
      req: request,
      key: request.headers[header],
      method: request.method,
      path: request.url.split('?')[0],
      route: request.routeOptions?.url ?? request.routerPath,
      body: request.body ?? null,
    });
    reply.hijack();
    reply.raw.writeHead(a.status, flatLines(a, replayed)).end(a.body);
    return reply;
  };
}

module.exports = { idempotent };
