--
-- Key locks (src/locks.c).  Concurrency, and the lock space other roles
-- cannot reach, are in test/isolation/specs/inbox_race.spec and
-- test/isolation/specs/locks_key_space.spec; locks shared by an application's login
-- roles in test/isolation/specs/owner_locks.spec.
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

-- the tag names the owner's role OID, so that no key of one application
-- can be made to collide with another's (a hash alone can be steered), for
-- key locks and the outbox's ordering key locks alike
CREATE ROLE regress_locks_a;
CREATE ROLE regress_locks_b;
SELECT idempotency.grant_usage('regress_locks_a');
SELECT idempotency.grant_usage('regress_locks_b');
CREATE TABLE lock_tags (role text, kind text, owner_oid oid, hash oid, space int2);
GRANT INSERT ON lock_tags TO regress_locks_a, regress_locks_b;
CREATE FUNCTION note_locks(kind text) RETURNS void LANGUAGE sql AS $$
	INSERT INTO public.lock_tags
	SELECT current_user, kind, l.classid, l.objid, l.objsubid FROM pg_catalog.pg_locks AS l
	 WHERE l.locktype = 'advisory' AND l.pid = pg_catalog.pg_backend_pid()
$$;
SET ROLE regress_locks_a;
BEGIN;
SELECT idempotency.lock('same-key', 'same-scope');
SELECT note_locks('key lock');
COMMIT;
BEGIN;
SELECT idempotency.outbox_send('t', '{}', 'same-ordering-key') IS NOT NULL AS sent;
SELECT note_locks('ordering key lock');
COMMIT;
SET ROLE regress_locks_b;
BEGIN;
SELECT idempotency.lock('same-key', 'same-scope');
SELECT note_locks('key lock');
COMMIT;
BEGIN;
SELECT idempotency.outbox_send('t', '{}', 'same-ordering-key') IS NOT NULL AS sent;
SELECT note_locks('ordering key lock');
COMMIT;
RESET ROLE;
SELECT t.role, t.kind, t.owner_oid = t.role::regrole::oid AS owner_in_tag, t.space,
	   t.hash = (SELECT o.hash FROM lock_tags AS o WHERE o.kind = t.kind AND o.role <> t.role) AS same_hash
  FROM lock_tags AS t ORDER BY 1, 2;
SELECT idempotency.forget_role('regress_locks_a') + idempotency.forget_role('regress_locks_b') > 0 AS forgotten;
DROP FUNCTION note_locks(text);
DROP TABLE lock_tags;
DROP OWNED BY regress_locks_a, regress_locks_b;
DROP ROLE regress_locks_a, regress_locks_b;

RESET search_path;
