// pg-idempotency: the idempotency extension's SQL API for Node.js services.
'use strict';

const { idempotent: express } = require('./lib/express');
const { idempotent: fastify } = require('./lib/fastify');
const { createHandler, parseKey, headerLines } = require('./lib/http');
const { runExternal, Work } = require('./lib/external');
const { receive, consumer } = require('./lib/inbox');
const { Relay } = require('./lib/relay');
const { ClaimLostError, mapError } = require('./lib/errors');

module.exports = {
  express, fastify, createHandler, parseKey, headerLines,
  runExternal, Work, receive, consumer, Relay, ClaimLostError, mapError,
};
