--
-- claim_stalled in a transaction that itself holds claims.  Its own claims
-- taken without external => true (or with defer_claim) are passed over,
-- whatever their lease: the transaction must finish them before it commits,
-- and a take-over would make them external and let it commit its work with
-- the claim unfinished.  Its own external claims whose lease ran out are
-- taken over: the transaction's claim follows the take-over, so that it
-- holds the record's current attempt and may record, renew and finish it,
-- with or without the attempt.
--
SET search_path = public;
\set VERBOSITY terse
CREATE FUNCTION own_attempt(k text) RETURNS int LANGUAGE sql AS $$
	SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = k AND r.scope = 'own'
$$;

-- 1. a claim taken in this transaction, then its lease runs out, then a
--    completer's batch in the same transaction: passed over, the claim is
--    still the transaction's, and finishes
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

-- 3. passed over in a savepoint too; the claim stays the transaction's
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

-- 4. passed over and left unfinished: the commit is refused (2D000), and
--    nothing of the transaction stays
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('own-4', 'own');
CREATE TABLE own_work (n int);
INSERT INTO own_work VALUES (4);
UPDATE idempotency.registry SET lease_until = now() - interval '1 second'
 WHERE key = 'own-4' AND scope = 'own';
SELECT count(*) AS taken FROM idempotency.claim_stalled('own');
COMMIT;
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'own-4';
SELECT to_regclass('own_work') IS NULL AS work_rolled_back;

-- 5. a deferred claim of a key whose record another transaction committed
--    since (written here by hand), stalled: passed over, so the deferred
--    claim still holds the commit
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('own-5', 'own', defer_claim => true);
INSERT INTO idempotency.registry (owner, scope, key, status, attempt, created_at, updated_at,
								  lease_until, expires_at)
SELECT current_user, 'own', 'own-5', 'processing', 1, now(), now(),
	   now() - interval '1 second', now() + interval '1 hour';
SELECT count(*) AS taken FROM idempotency.claim_stalled('own');
COMMIT;
SELECT count(*) AS records FROM idempotency.my_records WHERE key = 'own-5';

-- 6. an external claim of this transaction whose lease ran out is taken
--    over, and a claim of the transaction's in the same batch's scope that
--    is not external is passed over
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('own-6a', 'own', external => true);
SELECT outcome FROM idempotency.idempotent_begin('own-6b', 'own');
UPDATE idempotency.registry SET lease_until = now() - interval '1 second'
 WHERE key IN ('own-6a', 'own-6b') AND scope = 'own';
SELECT key FROM idempotency.claim_stalled('own');
SELECT idempotency.idempotent_finish('own-6b', '{"done": 6}', 'own');
COMMIT;
SELECT key, status FROM idempotency.my_records WHERE key LIKE 'own-6%' ORDER BY key;

DROP FUNCTION own_attempt(text);
