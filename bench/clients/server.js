// bench/clients/server.js VARIANT: one Node process serving POST /payments
// (JSON body {amount}, Idempotency-Key header) the way VARIANT protects it;
// the handler inserts one row into payments_VARIANT and answers 201 with
// {id, key, amount}.  bench/clients.sh starts one per variant.
//
//   ours      pg-idempotency's Express middleware (PG_IDEMPOTENCY: the path
//             of clients/node), the insert in its request transaction
//   ourssql   the same with a SQL handler (pay_ourssql(jsonb) in setup.sql),
//             which idempotent_call runs under the key: one statement
//   expidem   express-idempotency with express-idempotency-redis-adapter
//   nodeidem  @node-idempotency/core with its Redis storage adapter, in the
//             few lines of Express glue its README describes
//   dbos      a DBOS Transact workflow whose workflow ID is the key and whose
//             transaction step (the Drizzle data source, on node-postgres)
//             inserts the row
//   hand      Express and node-postgres by hand: a keys table claimed with
//             INSERT ... ON CONFLICT DO NOTHING, the insert, an UPDATE with
//             the answer, in one transaction; a retry reads the answer
//   floor     not idempotent: the least a server that keeps its answers in
//             PostgreSQL sends, one statement per request in autocommit
//             that returns the key's stored answer or makes the payment and
//             stores it; no claim, so concurrent duplicates all pay
//
// PostgreSQL from the PG* variables, Redis from REDIS_URL, the port from
// PORT; POOL connections to PostgreSQL (node-postgres's default, 10).
'use strict';

const express = require('express');
const { Pool } = require('pg');

const variant = process.argv[2];
const port = Number(process.env.PORT);
const poolSize = Number(process.env.POOL || 10);
const table = `payments_${variant}`;
const INSERT = `INSERT INTO ${table} (key, amount) VALUES ($1, $2) RETURNING id`;

/** The business write and the answer's body, the same in every variant. */
async function pay(db, key, amount) {
  const { rows: [row] } = await db.query(INSERT, [key, amount]);
  return { id: row.id, key, amount };
}

const app = express();
app.set('etag', false);
app.use(express.json());
app.get('/health', (req, res) => res.send('ok'));

const variants = {
  async ours() {
    const idempotency = require(process.env.PG_IDEMPOTENCY);
    const pool = new Pool({ max: poolSize });
    app.post('/payments', idempotency.express(pool, async (req, { client, key }) =>
      ({ status: 201, body: await pay(client, key, req.body.amount) })));
  },

  async ourssql() {
    const idempotency = require(process.env.PG_IDEMPOTENCY);
    const pool = new Pool({ max: poolSize });
    // a scope of its own: ours has the same role and route in the same
    // registry, and another request (its fingerprint names the key too)
    app.post('/payments', idempotency.express(pool, 'pay_ourssql(jsonb)', { scope: 'ourssql' }));
  },

  async expidem() {
    const { idempotency, getSharedIdempotencyService } = require('express-idempotency');
    const RedisAdapter = require('express-idempotency-redis-adapter').default;
    const adapter = new RedisAdapter({ connectionConfig: { url: process.env.REDIS_URL } });
    await adapter.connect();
    const pool = new Pool({ max: poolSize });
    // the package's README: the middleware calls next() on a replay too,
    // and the handler asks isHit(); a failed handler reports its error so
    // that the key is released
    app.post('/payments', idempotency({ dataAdapter: adapter }), async (req, res) => {
      const service = getSharedIdempotencyService();
      if (service.isHit(req)) return;
      try {
        res.status(201).json(await pay(pool, req.get('Idempotency-Key'), req.body.amount));
      } catch (err) {
        await service.reportError(req);
        throw err;
      }
    });
  },

  async nodeidem() {
    const { Idempotency, IdempotencyError, IdempotencyErrorCodes } = require('@node-idempotency/core');
    const { RedisStorageAdapter } = require('@node-idempotency/storage-adapter-redis');
    const storage = new RedisStorageAdapter({ url: process.env.REDIS_URL });
    await storage.connect();
    const idem = new Idempotency(storage, { enforceIdempotency: true });
    const pool = new Pool({ max: poolSize });
    const statusOf = {
      [IdempotencyErrorCodes.REQUEST_IN_PROGRESS]: 409,
      [IdempotencyErrorCodes.IDEMPOTENCY_FINGERPRINT_MISSMATCH]: 422,
      [IdempotencyErrorCodes.IDEMPOTENCY_KEY_MISSING]: 400,
      [IdempotencyErrorCodes.IDEMPOTENCY_KEY_LEN_EXEEDED]: 400,
    };
    // onRequest before the handler, onResponse after it and before the
    // answer leaves (the core package's README; its Express wrapper is not
    // on the registry)
    app.post('/payments', async (req, res) => {
      const params = { method: req.method, headers: req.headers, body: req.body, path: req.path };
      let cached;
      try {
        cached = await idem.onRequest(params);
      } catch (err) {
        if (!(err instanceof IdempotencyError)) throw err;
        return res.status(statusOf[err.code] ?? 400).json({ error: err.message });
      }
      if (cached) return res.status(cached.additional.status).json(cached.body);
      let body;
      try {
        body = await pay(pool, req.get('Idempotency-Key'), req.body.amount);
      } catch (err) {
        await idem.onResponse(params, { error: { message: err.message }, additional: { status: 500 } });
        throw err;
      }
      await idem.onResponse(params, { body, additional: { status: 201 } });
      res.status(201).json(body);
    });
  },

  async dbos() {
    const { DBOS } = require('@dbos-inc/dbos-sdk');
    const { DrizzleDataSource } = require('@dbos-inc/drizzle-datasource');
    const { sql } = require('drizzle-orm');
    // the data sources published for DBOS 5 are Prisma's only: DBOS 4.27.6
    // and its node-postgres (Drizzle) data source, the last release of both
    const ds = new DrizzleDataSource('app', { max: poolSize });
    const payStep = ds.registerTransaction(async (key, amount) => {
      const { rows: [row] } = await ds.client.execute(
        sql`INSERT INTO payments_dbos (key, amount) VALUES (${key}, ${amount}) RETURNING id`);
      return { id: row.id, key, amount };
    }, { name: 'payStep' });
    const payWorkflow = DBOS.registerWorkflow(async (key, amount) => payStep(key, amount),
      { name: 'payWorkflow' });
    DBOS.setConfig({
      name: 'bench-payments',
      systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL,
      systemDatabasePoolSize: poolSize,
      logLevel: 'error',
    });
    await DBOS.launch();
    // the key is the workflow ID: a retry gets the workflow's handle, and
    // its result
    app.post('/payments', async (req, res) => {
      const key = req.get('Idempotency-Key');
      if (!key) return res.status(400).json({ error: 'an Idempotency-Key header is needed' });
      const handle = await DBOS.startWorkflow(payWorkflow, { workflowID: key })(key, req.body.amount);
      res.status(201).json(await handle.getResult());
    });
  },

  async floor() {
    const pool = new Pool({ max: poolSize });
    const once = `WITH old AS (SELECT body FROM floor_answers WHERE key = $1),
      paid AS (INSERT INTO payments_floor (key, amount) SELECT $1, $2 WHERE NOT EXISTS (SELECT FROM old) RETURNING id),
      kept AS (INSERT INTO floor_answers (key, body)
               SELECT $1, json_build_object('id', id::text, 'key', $1::text, 'amount', $2::int)::text FROM paid
               ON CONFLICT DO NOTHING RETURNING body)
      SELECT body FROM old UNION ALL SELECT body FROM kept`;
    app.post('/payments', async (req, res) => {
      const key = req.get('Idempotency-Key');
      if (!key) return res.status(400).json({ error: 'an Idempotency-Key header is needed' });
      const { rows: [row] } = await pool.query(once, [key, req.body.amount]);
      if (!row) return res.status(409).json({ error: 'in progress' });
      res.status(201).type('application/json').send(row.body);
    });
  },

  async hand() {
    const pool = new Pool({ max: poolSize });
    app.post('/payments', async (req, res) => {
      const key = req.get('Idempotency-Key');
      if (!key) return res.status(400).json({ error: 'an Idempotency-Key header is needed' });
      const client = await pool.connect();
      let broken;
      try {
        await client.query('BEGIN');
        const claimed = await client.query(
          'INSERT INTO hand_keys (key) VALUES ($1) ON CONFLICT DO NOTHING RETURNING key', [key]);
        if (claimed.rowCount === 0) {
          // a committed claim: its answer, or none yet (another request
          // holds it; with READ COMMITTED the insert waited for it)
          const { rows: [k] } = await client.query(
            'SELECT status, body FROM hand_keys WHERE key = $1', [key]);
          await client.query('COMMIT');
          if (!k || k.status === null) return res.status(409).json({ error: 'in progress' });
          return res.status(k.status).type('application/json').send(k.body);
        }
        const body = JSON.stringify(await pay(client, key, req.body.amount));
        await client.query('UPDATE hand_keys SET status = 201, body = $2 WHERE key = $1', [key, body]);
        await client.query('COMMIT');
        res.status(201).type('application/json').send(body);
      } catch (err) {
        await client.query('ROLLBACK').catch((e) => { broken = e; });
        throw err;
      } finally {
        client.release(broken);
      }
    });
  },
};

async function main() {
  if (!variants[variant]) throw new Error(`unknown variant: ${variant}`);
  await variants[variant]();
  app.use((err, req, res, next) => {
    if (res.headersSent) return next(err);
    // express-idempotency sets the status (409, 417) before it passes its error on
    res.status(err.status ?? (res.statusCode >= 400 ? res.statusCode : 500)).json({ error: err.message });
  });
  app.listen(port, '127.0.0.1', () => console.log(`${variant} listening on ${port}`));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
