
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

-- the session's own default back: the script's first statement made its
-- transactions read-only until its checks passed
RESET default_transaction_read_only;
