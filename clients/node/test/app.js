// The service the HTTP tests drive, once on Express and once on Fastify,
// with the same routes.  node test/app.js express|fastify starts it alone
// (a worker the tests can kill) and prints the port it listens on.
'use strict';

const idempotency = require('..');

/** The routes: [path, options, handler (a function, or a SQL function's signature)] */
function routes() {
  const charge = async (req, { client, key, scope }) => {
    const { amount, fail } = req.body ?? {};
    if (!Number.isInteger(amount) || amount <= 0)
      return { status: 400, body: { error: 'amount must be a positive integer' } };
    const { rows: [c] } = await client.query(
      `INSERT INTO charges (idempotency_key, scope, amount, fail_with) VALUES ($1, $2, $3, $4)
       RETURNING id::text, amount`, [key ?? 'none', scope, amount, fail ?? null]);
    if (amount === 500) return { status: 500, body: { error: 'the provider failed' } };
    // header lines in their order; Link and Set-Cookie repeat
    return {
      status: 201,
      headers: [['Location', `/charges/${c.id}`], ['Link', `</charges/${c.id}/refunds>; rel="refunds"`],
        ['Set-Cookie', 'a=1'], ['Link', `</charges/${c.id}/receipt>; rel="receipt"`], ['Set-Cookie', 'b=2']],
      body: c,
    };
  };
  return [
    ['/charges', {}, charge],
    ['/charges/:id/refunds', {}, charge],
    ['/optional', { required: false }, charge],
    ['/waiting', { maxWait: '20 seconds' }, charge],
    ['/exact', { replayedHeader: false }, charge],
    ['/sql', {}, 'charge_sql(jsonb)'],
    ['/bytes', {}, async () => ({ status: 200, headers: { 'Content-Type': 'application/octet-stream' },
      body: Buffer.from([0, 255, 13, 10, 128, 1]) })],
  ];
}

/** @param {import('pg').Pool} pool */
function express(pool) {
  const e = require('express');
  const app = e();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use(e.json());
  for (const [path, options, handler] of routes()) app.post(path, idempotency.express(pool, handler, options));
  app.use((err, req, res, next) => res.status(500).json({ error: err.message }));
  return {
    listen: () => new Promise((resolve) => {
      const server = app.listen(0, '127.0.0.1', () => resolve({
        base: `http://127.0.0.1:${server.address().port}`,
        close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
      }));
    }),
  };
}

/** @param {import('pg').Pool} pool */
function fastify(pool) {
  const app = require('fastify')();
  for (const [path, options, handler] of routes()) app.post(path, idempotency.fastify(pool, handler, options));
  return {
    listen: async () => {
      await app.listen({ port: 0, host: '127.0.0.1' });
      return { base: `http://127.0.0.1:${app.server.address().port}`, close: () => app.close() };
    },
  };
}

module.exports = { express, fastify };

if (require.main === module) {
  const { pool } = require('./helpers');
  const db = pool();
  ({ express, fastify })[process.argv[2]](db).listen().then(({ base }) => console.log(`listening ${base}`));
}
