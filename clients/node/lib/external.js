// Work outside the database (doc/idempotency-keys.md, "Work outside the
// database"; doc/long-running-work.md): the claim is committed first
// (external => true), the work runs in steps, each recorded as a recovery
// point, the lease is renewed while it runs, and the finish passes the
// claim's attempt, so that a worker whose claim was taken over is fenced off
// (IK004) instead of overwriting the new owner's answer.
'use strict';

const sql = require('./sql');
const { ClaimLostError, LOST_CLAIM } = require('./errors');

/**
 * The claim's steps as a recovery state: each recorded step's result by its
 * name.  Kept whole in one recovery point, so that a take-over has every
 * earlier result, not only the last one.
 * @param {any} state
 * @returns {Record<string, any>}
 */
function stepsOf(state) {
  return state && typeof state === 'object' && state.steps && typeof state.steps === 'object'
    ? { ...state.steps } : {};
}

/** A claim of work outside the database, handed to the handler. */
class Work {
  /**
   * @param {import('pg').Pool} pool
   * @param {{ key: string, scope: string, leaseMs: number }} id
   * @param {any} claim idempotent_begin's row (outcome execute)
   */
  constructor(pool, id, claim) {
    this.pool = pool;
    this.key = id.key;
    this.scope = id.scope;
    this.leaseMs = id.leaseMs;
    /** the fencing token: every statement of this worker passes it */
    this.attempt = claim.attempt;
    this.previousAttempt = claim.previous_attempt;
    /** lease_expired: an earlier worker died, and may have done part of the work */
    this.previousEnd = claim.previous_end;
    /** the last step an earlier attempt recorded, or null */
    this.recoveryPoint = claim.recovery_point;
    /** @type {Record<string, any>} */
    this.steps = stepsOf(claim.recovery_state);
    this.finished = false;
    this.controller = new AbortController();
    /** aborted once the claim is lost: pass it to the calls the work makes */
    this.signal = this.controller.signal;
  }

  /** @param {any} err */
  lost(err) {
    const e = err instanceof ClaimLostError ? err
      : new ClaimLostError(`lost the claim of idempotency key "${this.key}": ${err.message}`, err);
    if (!this.signal.aborted) this.controller.abort(e);
    return e;
  }

  /** @param {string} text @param {any[]} values */
  async query(text, values) {
    if (this.signal.aborted) throw this.signal.reason;
    try {
      return await this.pool.query(text, values);
    } catch (err) {
      throw LOST_CLAIM.has(err.code) ? this.lost(err) : err;
    }
  }

  /**
   * Runs fn once for this key: a step that an attempt recorded returns its
   * recorded result without running again, so a take-over resumes after the
   * last recorded step.  fn's result (JSON) is recorded with the step's name
   * before step() returns.  A step whose worker died after fn but before the
   * record runs again: give the external call an idempotency key of its own,
   * made from this key and the step's name (`${work.key}/${name}`).
   * @template T
   * @param {string} name
   * @param {(work: Work) => Promise<T> | T} fn
   * @returns {Promise<T>}
   */
  async step(name, fn) {
    if (Object.prototype.hasOwnProperty.call(this.steps, name)) return this.steps[name];
    if (this.signal.aborted) throw this.signal.reason;
    const result = await fn(this);
    const recorded = result === undefined ? null : JSON.parse(JSON.stringify(result));
    const steps = { ...this.steps, [name]: recorded };
    await this.query(sql.CHECKPOINT, [this.key, name, JSON.stringify({ steps }), this.scope, this.attempt]);
    this.steps = steps;
    this.recoveryPoint = name;
    return recorded;
  }

  /**
   * Extends the lease by leaseMs from now; the runner calls it while the
   * work runs.  Throws ClaimLostError once the claim was taken over.
   * @returns {Promise<Date>} the new lease_until
   */
  async renew() {
    const { rows: [r] } = await this.query(sql.RENEW,
      [this.key, sql.interval(this.leaseMs), this.scope, this.attempt]);
    return r.lease_until;
  }

  /**
   * Stores the answer, fenced by the attempt, and commits writes(client)
   * with it in one transaction.  The finish comes first: it is the fencing
   * check, so a worker whose claim was taken over stops there, before its
   * writes (doc/long-running-work.md).
   * @param {{ response?: any, status?: number, headers?: any, body?: Buffer }} answer
   * @param {(client: import('pg').PoolClient) => Promise<void>} [writes]
   */
  async finish(answer, writes) {
    if (this.signal.aborted) throw this.signal.reason;
    const client = await this.pool.connect();
    let broken;
    try {
      const finish = [sql.FINISH, sql.finishValues({
        key: this.key, scope: this.scope, attempt: this.attempt, ...answer })];
      if (writes) {
        await sql.batch(client, ['BEGIN', finish]);
        await writes(client);
        await client.query('COMMIT');
      } else await sql.batch(client, ['BEGIN', finish, 'COMMIT']);
      this.finished = true;
    } catch (err) {
      await client.query('ROLLBACK').catch((e) => { broken = e; });
      throw LOST_CLAIM.has(err.code) ? this.lost(err) : err;
    } finally {
      client.release(broken);
    }
  }

  /** Gives the claim up, so that the next request executes at once. */
  async abandon() {
    await this.query(sql.ABANDON, [this.key, this.scope, this.attempt]);
    this.finished = true;
  }
}

/**
 * @typedef {object} ExternalOptions
 * @property {string} key
 * @property {string} [scope] default ''
 * @property {any} [request] the request, fingerprinted (IK001 if the key is reused with another)
 * @property {number} [lease] milliseconds a claim is protected without renewal (default 30000)
 * @property {number} [renewEvery] milliseconds between renewals (default a third of lease; 0: never)
 * @property {number | string} [ttl] how long the record is kept
 * @property {number | string | null} [maxWait] as for the middleware (default 0: do not wait)
 * @property {(leaseUntil: Date) => void} [onRenew] called after each renewal
 * @property {(err: Error) => void} [onRenewError] called when a renewal fails but the claim is not lost
 * @property {(answer: any) => { response?: any, status?: number, headers?: any, body?: Buffer } | null} [toFinish]
 *   what to store of the handler's answer; null: abandon instead (default: the answer as response)
 */

/**
 * Claims key for work outside the database and runs handler(work) if this
 * call executes it.  The answer is the handler's result, stored with the
 * attempt.  A handler that throws before any step was recorded gives the
 * claim up (the next request executes at once); one that throws after a
 * step keeps it, so that a take-over after the lease resumes after that
 * step.
 * @param {import('pg').Pool} pool
 * @param {ExternalOptions} options
 * @param {(work: Work) => Promise<any>} handler
 * @returns {Promise<{ outcome: 'completed' | 'abandoned' | 'replay' | 'in_progress',
 *                     answer?: any, claim: any }>}
 */
async function runExternal(pool, options, handler) {
  const key = options.key;
  const scope = options.scope ?? '';
  const leaseMs = options.lease ?? 30000;
  const begin = sql.beginStatement({ ttl: options.ttl, maxWait: options.maxWait ?? 0,
    lease: leaseMs, external: true });
  const { rows: [claim] } = await pool.query(begin.text,
    begin.values({ key, scope, request: options.request ?? null }));
  if (claim.outcome !== 'execute') return { outcome: claim.outcome, claim };

  const work = new Work(pool, { key, scope, leaseMs }, claim);
  const every = options.renewEvery ?? Math.floor(leaseMs / 3);
  let timer;
  if (every > 0) {
    // renewals in a chain, never two at once: a slow one is not overtaken
    const tick = () => {
      timer = setTimeout(() => {
        work.renew().then((until) => options.onRenew?.(until), (err) => {
          if (!(err instanceof ClaimLostError)) options.onRenewError?.(err);
        }).finally(() => { if (!work.finished && !work.signal.aborted) tick(); });
      }, every);
      timer.unref();
    };
    tick();
  }
  const toFinish = options.toFinish ?? ((answer) => ({ response: answer ?? null }));
  try {
    const answer = await handler(work);
    if (work.finished) return { outcome: 'completed', answer, claim };
    const stored = toFinish(answer);
    if (stored === null) {
      await work.abandon();
      return { outcome: 'abandoned', answer, claim };
    }
    await work.finish(stored);
    return { outcome: 'completed', answer, claim };
  } catch (err) {
    if (!work.finished && !work.signal.aborted && work.recoveryPoint === null)
      await work.abandon().catch(() => {});
    throw err;
  } finally {
    work.finished = true;
    clearTimeout(timer);
  }
}

module.exports = { runExternal, Work };
