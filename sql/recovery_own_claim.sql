--
-- claim_stalled takes over a claim that the calling transaction itself holds
-- (its lease ran out during the transaction): the transaction's claim follows
-- the take-over, so that it holds the record's current attempt and may
-- record, renew and finish it, with or without the attempt; a rollback to a
-- savepoint undoes the take-over and the claim it superseded is current
-- again.
--
SET search_path = public;
\set VERBOSITY terse
CREATE FUNCTION own_attempt(k text) RETURNS int LANGUAGE sql AS $$
	SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = k AND r.scope = 'own'
$$;

-- 1. a claim taken in this transaction, then its lease runs out, then a
--    completer's batch in the same transaction
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('own-1', 'own');
UPDATE idempotency.registry SET lease_until = now() - interval '1 second'
 WHERE key = 'own-1' AND scope = 'own';
SELECT count(*) <= 1 AS batch_taken FROM idempotency.claim_stalled('own');
SELECT idempotency.idempotent_checkpoint('own-1', 'step-1', NULL, 'own');
SELECT idempotency.idempotent_checkpoint('own-1', 'step-2', NULL, 'own', attempt => own_attempt('own-1'));
SELECT idempotency.idempotent_renew('own-1', '1 hour', 'own') > now() AS renewed;
SELECT idempotency.idempotent_finish('own-1', '{"done": 1}', 'own', attempt => own_attempt('own-1'));
COMMIT;
SELECT status, recovery_point, response FROM idempotency.my_records WHERE key = 'own-1';

-- 2. a completer that takes two batches in one transaction, with a lease
--    that runs out between them
SELECT outcome FROM idempotency.idempotent_begin('own-2', 'own', external => true);
UPDATE idempotency.registry SET lease_until = now() - interval '1 second'
 WHERE key = 'own-2' AND scope = 'own';
BEGIN;
SELECT key FROM idempotency.claim_stalled('own');
UPDATE idempotency.registry SET lease_until = now() - interval '1 second'
 WHERE key = 'own-2' AND scope = 'own';
SELECT count(*) <= 1 AS second_batch FROM idempotency.claim_stalled('own');
SELECT idempotency.idempotent_checkpoint('own-2', 'step-1', NULL, 'own', attempt => own_attempt('own-2'));
SELECT idempotency.idempotent_finish('own-2', '{"done": 2}', 'own');
COMMIT;
SELECT status, recovery_point, response FROM idempotency.my_records WHERE key = 'own-2';

-- 3. the take-over undone by ROLLBACK TO SAVEPOINT: the earlier claim is
--    the transaction's again
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('own-3', 'own');
UPDATE idempotency.registry SET lease_until = now() - interval '1 second'
 WHERE key = 'own-3' AND scope = 'own';
SAVEPOINT s;
SELECT key FROM idempotency.claim_stalled('own');
ROLLBACK TO SAVEPOINT s;
SELECT idempotency.idempotent_finish('own-3', '{"done": 3}', 'own');
COMMIT;
SELECT status, response FROM idempotency.my_records WHERE key = 'own-3';

DROP FUNCTION own_attempt(text);
