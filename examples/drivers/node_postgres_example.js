// The idempotency extension from node-postgres (npm: pg).
//
// What psycopg_example.py does, with node-postgres: objects are sent as
// JSON, Buffers as bytea, and an interval as its text; err.code is the
// SQLSTATE (IK001 for a key reused with another request).  Connects with
// the PG* environment variables.  usage: node node_postgres_example.js KEY_PREFIX
//
// Behind PgBouncer in transaction mode nothing needs changing: node-postgres
// uses the unnamed statement unless a query is given a name, and a named
// query would be prepared on whichever server connection ran it.
'use strict';

const assert = require('node:assert/strict');
const { Client } = require('pg');

const BEGIN = `SELECT outcome, status_code, body, headers
                 FROM idempotency.idempotent_begin($1, 'drivers', $2, ttl => $3)`;
const FINISH = `SELECT idempotency.idempotent_finish($1, NULL, 'drivers', status_code => $2,
                                                     body => $3, headers => $4)`;

async function main(prefix) {
  const first = new Client(), second = new Client();
  await first.connect();
  await second.connect();
  for (let i = 0; i < 8; i++) {
    const key = `${prefix}-${i}`;
    const request = { amount: 100 + i };
    const body = Buffer.concat([Buffer.from(`{"id": ${i}}`), Buffer.from([0, 255])]);
    const headers = { Location: `/things/${i}`, 'Content-Type': 'application/json' };

    await first.query('BEGIN');
    const { rows: [claim] } = await first.query(BEGIN, [key, request, '1 hour']);
    assert.equal(claim.outcome, 'execute');
    await first.query(FINISH, [key, 201, body, headers]);
    await first.query('COMMIT');

    const { rows: [replay] } = await second.query(BEGIN, [key, request, '1 hour']);
    assert.deepEqual({ ...replay }, { outcome: 'replay', status_code: 201, body, headers });

    await assert.rejects(second.query(BEGIN, [key, { amount: 1 }, '1 hour']),
                         (err) => err.code === 'IK001');
  }
  await first.end();
  await second.end();
  console.log('node-postgres: 8 keys executed, replayed byte for byte, reuse refused with IK001');
}

main(process.argv[2]).catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
