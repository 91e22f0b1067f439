
/*
 * The end of every portable script, which sql/include.pl writes there with
 * the version the script leaves (@TO@): the portable edition has no row in
 * pg_extension, so this says which version is installed, to its users and
 * to the next update script, which checks it first.
 */
CREATE OR REPLACE FUNCTION idempotency.portable_version()
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$SELECT '@TO@'::pg_catalog.text$$;

COMMENT ON FUNCTION idempotency.portable_version() IS
'the version of the portable edition of idempotency installed in this database';

-- the settings the script found back (sql/checks/portable_begin): the
-- search_path of the statements after it in the transaction, or, run
-- statement by statement, the session's own
DO $$
BEGIN
	IF pg_catalog.current_setting('idempotency_script.mode', true) OPERATOR(pg_catalog.=) ANY (ARRAY['transaction', 'savepoints']) THEN
		PERFORM pg_catalog.set_config('search_path',
									  pg_catalog.current_setting('idempotency_script.search_path'), true);
		PERFORM pg_catalog.set_config('idempotency_script.mode', '', true);
	ELSIF pg_catalog.current_setting('idempotency_script.mode', true) OPERATOR(pg_catalog.=) 'statements' THEN
		PERFORM pg_catalog.set_config(s.name, pg_catalog.current_setting('idempotency_script.' OPERATOR(pg_catalog.||) s.name), false),
				pg_catalog.set_config('idempotency_script.' OPERATOR(pg_catalog.||) s.name, '', false)
		   FROM pg_catalog.string_to_table(pg_catalog.current_setting('idempotency_script.saved'), ' ') AS s(name);
		PERFORM pg_catalog.set_config('idempotency_script.saved', '', false),
				pg_catalog.set_config('idempotency_script.mode', '', false);
	END IF;
END
$$;
