--
-- Roles: a role reaches only its own records, cannot write the registry
-- directly, and cannot call the API until it is granted.
--
SET search_path = public;

CREATE ROLE regress_alice;
CREATE ROLE regress_bob;
CREATE ROLE regress_mallory;
SELECT idempotency.grant_usage('regress_alice');
SELECT idempotency.grant_usage('regress_bob');

-- without a grant, the API is closed; the key type is open to everyone
SET ROLE regress_mallory;
SELECT idempotency.idempotent_begin('k');
SELECT idempotency.idempotent_finish('k', '{}');
SELECT idempotency.idempotent_abandon('k');
SELECT * FROM idempotency.my_records;
SELECT * FROM idempotency.registry;
SELECT idempotency.grant_usage('regress_mallory');
SELECT 'k'::idempotency.key, idempotency.make_key('a', 'b', 'c');
RESET ROLE;

-- alice claims and finishes a key
SET ROLE regress_alice;
SELECT outcome FROM idempotency.idempotent_begin('shared-key', request => '{"from": "alice"}', external => true);
SELECT idempotency.idempotent_finish('shared-key', '{"secret": "alice''s card"}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'shared-key' AND r.scope = ''));
SELECT outcome, response FROM idempotency.idempotent_begin('shared-key', request => '{"from": "alice"}', external => true);
SELECT key, status, response FROM idempotency.my_records;
-- no direct access to the table
SELECT * FROM idempotency.registry;
INSERT INTO idempotency.registry (owner, scope, key, status, attempt, created_at, updated_at, expires_at)
VALUES ('regress_bob', '', 'planted', 'completed', 1, now(), now(), now() + interval '1 day');
UPDATE idempotency.registry SET response = '{}';
DELETE FROM idempotency.registry;
RESET ROLE;

-- bob uses the same key: a record of his own, nothing of alice's
SET ROLE regress_bob;
SELECT key, status FROM idempotency.my_records;
SELECT outcome, response FROM idempotency.idempotent_begin('shared-key', request => '{"from": "bob"}', external => true);
SELECT idempotency.idempotent_finish('shared-key', '{"bob": true}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'shared-key' AND r.scope = ''));
-- bob cannot finish or abandon alice's claim: for him it does not exist
RESET ROLE;
SET ROLE regress_alice;
SELECT outcome FROM idempotency.idempotent_begin('alice-open', external => true);
RESET ROLE;
SET ROLE regress_bob;
SELECT idempotency.idempotent_finish('alice-open', '{"stolen": true}');
SELECT idempotency.idempotent_abandon('alice-open');
-- a leaky function sees only bob's rows through the security-barrier view
CREATE FUNCTION pg_temp.leak(r text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN RAISE NOTICE 'leak saw %', r; RETURN true; END $$;
SELECT key FROM idempotency.my_records WHERE pg_temp.leak(key::text || '/' || coalesce(response::text, ''));
RESET ROLE;
DROP FUNCTION pg_temp.leak(text);

-- the owner recorded is the role name (SET ROLE counts, as current_user does)
SELECT owner, key, status, response FROM idempotency.registry ORDER BY owner, key;

-- a SECURITY DEFINER wrapper's records belong to its owner, not the caller
CREATE FUNCTION alice_pays(k idempotency.key) RETURNS text
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
AS $$ SELECT outcome FROM idempotency.idempotent_begin(k, external => true) $$;
ALTER FUNCTION alice_pays(idempotency.key) OWNER TO regress_alice;
GRANT EXECUTE ON FUNCTION alice_pays(idempotency.key) TO regress_mallory;
SET ROLE regress_mallory;
SELECT alice_pays('via-definer');
RESET ROLE;
SELECT owner FROM idempotency.registry WHERE key = 'via-definer';
DROP FUNCTION alice_pays(idempotency.key);

-- privileges as installed
SELECT p.proname, has_function_privilege('regress_mallory', p.oid, 'EXECUTE') AS public_can_execute
  FROM pg_proc p WHERE p.pronamespace = 'idempotency'::regnamespace
 ORDER BY 1;
-- the Citus delegates are open to all, and refuse, when they run, a role
-- that may not run the function they stand for
SET ROLE regress_mallory;
SELECT found FROM idempotency.citus_lookup('k', 's', NULL);
SELECT outcome FROM idempotency.citus_idempotent_begin('k', 's', NULL, '1 day', NULL, true, false, NULL, false, true);
SELECT idempotency.citus_idempotent_finish('k', '{}', 's', NULL, false, NULL, NULL, NULL, NULL);
SELECT idempotency.citus_idempotent_abandon('k', 's', NULL);
SELECT idempotency.citus_idempotent_checkpoint('k', 'step', '{}', 's', NULL);
SELECT idempotency.citus_idempotent_renew('k', '1 minute', 's', NULL);
RESET ROLE;
-- and the functions behind the Citus form of the my_* views, open to all
-- too, return rows only to a role that may read the view
SET ROLE regress_mallory;
SELECT count(*) FROM idempotency.citus_my_records();
SELECT count(*) FROM idempotency.citus_my_tokens();
SELECT count(*) FROM idempotency.citus_my_outbox();
RESET ROLE;
SET ROLE regress_alice;
SELECT count(*) > 0 AS sees_own FROM idempotency.citus_my_records();
RESET ROLE;
REVOKE SELECT ON idempotency.my_records FROM regress_alice;
SET ROLE regress_alice;
SELECT count(*) FROM idempotency.citus_my_records();
RESET ROLE;
GRANT SELECT ON idempotency.my_records TO regress_alice;

TRUNCATE idempotency.registry;
DROP OWNED BY regress_alice, regress_bob;
DROP ROLE regress_alice, regress_bob, regress_mallory;
RESET search_path;
