// What the extension's SQLSTATEs mean to an HTTP client (doc/errors.md,
// "How an HTTP layer maps idempotent_begin"), in one table.
'use strict';

/**
 * @typedef {[status: number, message: string, retryAfter?: number]} Mapping
 */

/**
 * Errors that say the request itself is refused.  Only the claim's errors
 * are read this way: a 22P02 from the handler's own INSERT is a bug of the
 * handler, not a bad key, and goes to the framework's error handler.
 * @type {Record<string, Mapping>}
 */
const CLAIM_ERRORS = {
  IK001: [422, 'the idempotency key was already used for a different request'],
  IK005: [403, 'the idempotency key is not a valid token'],
  '22P02': [400, 'the idempotency key is not valid'],
  '22004': [400, 'the idempotency key is not valid'],
  '22023': [400, 'the idempotency key or scope is not valid'],
};

/**
 * Errors after which a retry of the same request is the answer, wherever
 * they happen in the request's transaction: it rolled back, so nothing was
 * kept and the retry executes or replays.
 * @type {Record<string, Mapping>}
 */
const TRANSIENT_ERRORS = {
  '40001': [409, 'a concurrent request with the same key; retry', 1],
  '40P01': [409, 'a concurrent request with the same key; retry', 1],
  '55P03': [503, 'the service is busy or being updated; retry', 1],
  '57014': [503, 'the request took too long; retry', 1],
};

/**
 * The HTTP answer for an error raised in the request's transaction, or
 * undefined for one the caller should rethrow.
 * @param {any} err
 * @param {boolean} inClaim whether the error came from idempotent_begin
 * @returns {Mapping | undefined}
 */
function mapError(err, inClaim) {
  const code = err && err.code;
  if (typeof code !== 'string') return undefined;
  return TRANSIENT_ERRORS[code] ?? (inClaim ? CLAIM_ERRORS[code] : undefined);
}

/**
 * Raised to a worker that no longer holds its claim: another worker took it
 * over (IK004), or it is gone (IK002) or finished (IK003).  The worker must
 * stop; the key belongs to someone else now.
 */
class ClaimLostError extends Error {
  /** @param {string} message @param {any} [cause] */
  constructor(message, cause) {
    super(message, { cause });
    this.name = 'ClaimLostError';
    this.code = cause && cause.code;
  }
}

const LOST_CLAIM = new Set(['IK002', 'IK003', 'IK004']);

module.exports = { mapError, ClaimLostError, LOST_CLAIM, CLAIM_ERRORS, TRANSIENT_ERRORS };
