--
-- ALTER EXTENSION idempotency UPDATE from 1.0 against an installation's own
-- objects and grants (test/tap/027_update_from_1_0.pl compares the catalog and
-- a dump after the update).
--
SET search_path = public;
\set VERBOSITY default
\set SHOW_CONTEXT never
\set origdb :DBNAME
CREATE DATABASE regress_update;
\c regress_update
SET search_path = public;
CREATE EXTENSION idempotency VERSION '1.0';

-- Objects of the installation that depend on functions the update replaces
-- (a BEGIN ATOMIC function that claims keys, a view over lookup()): the
-- update names them and changes nothing
CREATE ROLE regress_owner_app;
CREATE SCHEMA regress_own AUTHORIZATION regress_owner_app;
SET ROLE regress_owner_app;
CREATE FUNCTION regress_own.claim(k text) RETURNS text LANGUAGE sql
BEGIN ATOMIC
	SELECT outcome FROM idempotency.idempotent_begin(k);
END;
CREATE VIEW regress_own.peek AS SELECT found FROM idempotency.lookup('regress-key');
RESET ROLE;
ALTER EXTENSION idempotency UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
-- dropped, the update runs; created again, they work
DROP VIEW regress_own.peek;
DROP FUNCTION regress_own.claim(text);
ALTER EXTENSION idempotency UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
CREATE FUNCTION regress_own.claim(k text) RETURNS text LANGUAGE sql
BEGIN ATOMIC
	SELECT outcome FROM idempotency.idempotent_begin(k, external => true);
END;
SELECT regress_own.claim('regress-dep-1');
DROP FUNCTION regress_own.claim(text);
DROP SCHEMA regress_own;

\c :origdb
DROP DATABASE regress_update;
CREATE DATABASE regress_update;
\c regress_update
SET search_path = public;
CREATE EXTENSION idempotency VERSION '1.0';

-- Served with the 1.0 objects, a claim commits on its own, as in 1.0; after
-- the update, one taken without external => true must be finished in its
-- transaction
SELECT outcome FROM idempotency.idempotent_begin('regress-v10');
SELECT key, status FROM idempotency.registry WHERE key = 'regress-v10';
ALTER EXTENSION idempotency UPDATE;
SELECT outcome FROM idempotency.idempotent_begin('regress-v11');
SELECT count(*) FROM idempotency.registry WHERE key = 'regress-v11';
SELECT outcome FROM idempotency.idempotent_begin('regress-v11', external => true);
SELECT key, status FROM idempotency.registry WHERE key LIKE 'regress-v1_' ORDER BY key;

\c :origdb
DROP DATABASE regress_update;
CREATE DATABASE regress_update;
\c regress_update
SET search_path = public;
CREATE EXTENSION idempotency VERSION '1.0';

-- A grant an administrator took back stays taken back.  The Citus delegates
-- (which on one server do what the functions they stand for do) are open to
-- everyone from 1.2 on, the same on a new installation as on an updated
-- one, and refuse, when they run, a caller who may not run the function
-- they stand for
CREATE ROLE regress_clerk;
CREATE ROLE regress_begin_only;
SELECT idempotency.grant_usage('regress_clerk');
REVOKE EXECUTE ON FUNCTION idempotency.idempotent_abandon(text, text, integer) FROM regress_clerk;
REVOKE EXECUTE ON FUNCTION idempotency.lookup(text, text, jsonb) FROM regress_clerk;
GRANT EXECUTE ON FUNCTION idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean)
	TO regress_begin_only;
ALTER EXTENSION idempotency UPDATE;
SELECT r.role, p.proname AS delegate,
	   has_function_privilege(r.role, p.oid, 'EXECUTE') AS delegate_granted
  FROM (VALUES ('regress_clerk'), ('regress_begin_only')) AS r (role),
	   pg_proc AS p
 WHERE p.pronamespace = 'idempotency'::regnamespace
   AND p.proname IN ('citus_idempotent_begin', 'citus_idempotent_finish', 'citus_idempotent_abandon',
					 'citus_lookup', 'citus_idempotent_checkpoint', 'citus_idempotent_renew')
 ORDER BY 1, 2;

-- the roles 1.1 took for application roles (the grantees of
-- idempotent_begin, by grant_usage or by hand) are the application roles
SELECT role_name FROM idempotency.application_roles ORDER BY 1;

-- so a delegate refuses a caller who may not run the function it stands
-- for, whatever was granted on the delegate itself
GRANT EXECUTE ON FUNCTION idempotency.citus_lookup(idempotency.key, text, jsonb) TO regress_clerk;
SET ROLE regress_clerk;
SELECT outcome FROM idempotency.idempotent_begin('regress-k', 's', external => true);
SELECT found FROM idempotency.citus_lookup('regress-k', 's', NULL);
SELECT idempotency.citus_idempotent_abandon('regress-k', 's', NULL);
SELECT outcome FROM idempotency.citus_idempotent_begin('regress-k2', 's', NULL, '1 day', NULL, true, false, NULL, false, true);
RESET ROLE;

\c :origdb
DROP DATABASE regress_update;
CREATE DATABASE regress_update;
\c regress_update
SET search_path = public;
CREATE EXTENSION idempotency VERSION '1.1';

-- The objects an update creates would take the default privileges of the
-- superuser who runs it, those in the extension's schema as well: the
-- update refuses them and changes nothing, and once they are revoked it
-- runs and grants nothing to the role they named
CREATE ROLE regress_reader;
ALTER DEFAULT PRIVILEGES IN SCHEMA idempotency GRANT SELECT ON TABLES TO regress_reader;
DO $$
BEGIN
	ALTER EXTENSION idempotency UPDATE;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE 'refused: %', pg_catalog.replace(SQLERRM, current_user, 'INSTALLER');
END
$$;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
ALTER DEFAULT PRIVILEGES IN SCHEMA idempotency REVOKE SELECT ON TABLES FROM regress_reader;
ALTER EXTENSION idempotency UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'idempotency';
SELECT count(*) AS granted_to_reader
  FROM pg_class AS c, aclexplode(c.relacl) AS a
 WHERE c.relnamespace = 'idempotency'::regnamespace AND a.grantee = 'regress_reader'::regrole;

\c :origdb
DROP DATABASE regress_update;
DROP ROLE regress_owner_app, regress_clerk, regress_begin_only, regress_reader;
