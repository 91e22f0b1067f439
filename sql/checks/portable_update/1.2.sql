/*
 * The beginning of the portable edition's update script from @FROM@ to @TO@
 * (sql/include.pl writes it there), after the beginning of every portable
 * script (sql/checks/portable_begin).  It refuses a database where the
 * portable edition is not installed, or is at another version than @FROM@
 * (the scripts in between come first), a role other than the one that
 * installed it (the owner of every object the update replaces), an
 * installer whose default privileges would apply to the new objects, and
 * a run statement by statement: an update changes what holds the
 * applications' records, and a statement that failed part way (a lock
 * timeout, say) would leave the others done, the new version named, and
 * the next run of the script refused by what the first left.  In one
 * transaction it is all or nothing.
 */
#include "checks/portable_begin/1.2.sql"

DO $$
DECLARE
	installer pg_catalog.name;
	installed pg_catalog.text;
	defaults pg_catalog.text;
BEGIN
	SELECT pg_catalog.pg_get_userbyid(n.nspowner) INTO installer
	  FROM pg_catalog.pg_namespace AS n
	 WHERE n.nspname OPERATOR(pg_catalog.=) 'idempotency';
	IF NOT FOUND THEN
		RAISE EXCEPTION 'the portable edition of idempotency is not installed in this database'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Install version @TO@ with its install script (make portable).';
	END IF;
	-- the extension's schema, or one the portable edition did not make,
	-- before who may update it (its owner is no installer); and only a
	-- function of the schema owner's is called below: nobody else's code
	-- runs with the installer's privileges
	PERFORM
	  FROM pg_catalog.pg_proc AS p
	 WHERE p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regprocedure('idempotency.portable_version()')
	   AND p.proowner OPERATOR(pg_catalog.=) (SELECT n.nspowner FROM pg_catalog.pg_namespace AS n
											   WHERE n.nspname OPERATOR(pg_catalog.=) 'idempotency');
	IF NOT FOUND THEN
		RAISE EXCEPTION 'schema "idempotency" holds no portable edition of idempotency'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = 'It has no function idempotency.portable_version() of its owner''s: it is the extension''s schema, or the portable edition did not create it.',
				  HINT = 'Update the extension with ALTER EXTENSION idempotency UPDATE.';
	END IF;
	IF installer OPERATOR(pg_catalog.<>) CURRENT_USER THEN
		RAISE EXCEPTION 'must be the owner of schema idempotency to update it'
			USING ERRCODE = 'insufficient_privilege',
				  DETAIL = pg_catalog.format('Role "%s" installed the portable edition and owns its objects.', installer);
	END IF;
	installed := idempotency.portable_version();
	IF installed OPERATOR(pg_catalog.<>) '@FROM@' THEN
		RAISE EXCEPTION 'this script updates the portable edition of idempotency from @FROM@ to @TO@, and version % is installed', installed
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = CASE WHEN installed OPERATOR(pg_catalog.=) '@TO@'
							  THEN 'It is up to date.'
							  ELSE pg_catalog.format('Run the update scripts from version %s in order, each once.', installed) END;
	END IF;
	#include "checks/installer_defaults/1.2.sql"
	IF COALESCE(pg_catalog.current_setting('idempotency_script.mode', true), '') OPERATOR(pg_catalog.<>) 'transaction' THEN
		RAISE EXCEPTION 'the update of idempotency from @FROM@ to @TO@ must run in one transaction'
			USING ERRCODE = 'no_active_sql_transaction',
				  DETAIL = 'Run statement by statement, or each statement in a savepoint of its own, a statement that failed would leave the others done.  Nothing was changed, and run statement by statement, the session''s transactions are read-only until the script''s last statement.',
				  HINT = 'Run it with psql --single-transaction -v ON_ERROR_STOP=1 -f, or in a migration tool''s transaction.';
	END IF;
	#include "checks/portable_checked/1.2.sql"
EXCEPTION WHEN OTHERS THEN
	#include "checks/portable_refused/1.2.sql"
END
$$;
