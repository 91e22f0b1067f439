--
-- Key locks (src/locks.c).  Concurrency, and the lock space other roles
-- cannot reach, are in test/specs/inbox_race.spec and
-- test/specs/locks_key_space.spec; locks shared by an application's login
-- roles in test/specs/owner_locks.spec.
--
SET search_path = public;

-- locks: transaction-scoped, per role, scope and key
BEGIN;
SELECT idempotency.lock('hot-key');
SELECT idempotency.try_lock('hot-key') AS reentrant;
SELECT count(*) AS advisory_locks FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
COMMIT;
SELECT count(*) AS released FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
SELECT idempotency.lock(NULL);
SELECT idempotency.try_lock('k', NULL);

RESET search_path;
