// A payments API whose POST /charges is safe to retry: the reference use of
// the idempotency extension from Node.js (doc/idempotency-keys.md, "An HTTP service").
// Connection settings come from the PG* environment variables; PORT and
// HOST say where to listen.
'use strict';

const express = require('express');
const { Pool } = require('pg');
const { idempotent } = require('./idempotency-key');

const pool = new Pool();
pool.on('error', (err) => console.error('idle connection lost:', err.message));
const app = express();
app.disable('x-powered-by');
app.set('etag', false);
app.use(express.json());

app.post('/charges', idempotent(pool, async (db, req) => {
  const { amount, currency } = req.body ?? {};
  if (!Number.isInteger(amount) || amount <= 0 || typeof currency !== 'string')
    return { status: 400, body: { error: 'amount must be a positive integer, currency a string' } };
  const { rows: [charge] } = await db.query(
    `INSERT INTO charges (amount, currency, idempotency_key)
     VALUES ($1, $2, $3) RETURNING id::text, amount, currency, created_at`,
    [amount, currency, req.idempotencyKey]);
  // header lines in their order; Link repeats (one line per link)
  return {
    status: 201,
    headers: [['Location', `/charges/${charge.id}`],
              ['Link', `</charges/${charge.id}/refunds>; rel="refunds"`],
              ['Link', `</charges/${charge.id}/receipt>; rel="receipt"`]],
    body: charge,
  };
}));

// Errors not mapped to a status of their own: 500, without details.
app.use((err, req, res, next) => {
  console.error(err);
  res.status(err.status ?? 500).json({ error: err.status ? err.message : 'internal error' });
});

const server = app.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? '127.0.0.1', () =>
  console.log(`listening on ${server.address().address}:${server.address().port}`));
