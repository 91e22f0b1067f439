#!/usr/bin/env node
// The outbox relay as a command: idempotency-relay [options] PUBLISH_MODULE.
// The module exports the publish function (module.exports, a default
// export or a named "publish"); the connection comes from the PG*
// environment variables, as for psql.
'use strict';

const path = require('node:path');
const { parseArgs } = require('node:util');
const { pathToFileURL } = require('node:url');
const { Pool } = require('pg');
const { Relay } = require('../lib/relay');

const usage = `usage: idempotency-relay [--once] [--batch-size N] [--lease INTERVAL] PUBLISH_MODULE

Publishes the outbox's messages with the function PUBLISH_MODULE exports,
as the role the PG* environment variables connect as.
  --once            publish what is ready, then exit (0, or 1 if a message failed)
  --batch-size N    messages per fetch (default 100)
  --lease INTERVAL  how long a batch is held (default '30 seconds')`;

async function main() {
  let args;
  try {
    args = parseArgs({
      allowPositionals: true,
      options: {
        once: { type: 'boolean' },
        'batch-size': { type: 'string' },
        lease: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    console.error(`${err.message}\n${usage}`);
    return 2;
  }
  if (args.values.help) {
    console.log(usage);
    return 0;
  }
  if (args.positionals.length !== 1) {
    console.error(usage);
    return 2;
  }
  // a CommonJS or an ES module, by its path from the current directory
  const mod = await import(pathToFileURL(path.resolve(args.positionals[0])).href);
  const publish = [mod.publish, mod.default?.publish, mod.default, mod]
    .find((f) => typeof f === 'function');
  if (!publish) {
    console.error(`${args.positionals[0]} exports no publish function`);
    return 2;
  }
  const pool = new Pool({ max: 2 });
  pool.on('error', (err) => console.error(`idempotency relay: idle connection lost: ${err.message}`));
  const relay = new Relay(pool, publish, {
    batchSize: args.values['batch-size'] === undefined ? undefined : Number(args.values['batch-size']),
    lease: args.values.lease,
  });
  try {
    if (args.values.once) {
      const n = await relay.drain();
      console.error(`idempotency relay: ${n} message(s) published`);
      return 0;
    }
    for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => relay.stop());
    await relay.run();
    return 0;
  } finally {
    await pool.end();
  }
}

main().then((code) => { process.exitCode = code; }, (err) => {
  console.error(`idempotency relay: ${err.message}`);
  process.exitCode = 1;
});
