CREATE FUNCTION idempotency.forget_key(role_name pg_catalog.text,
									   key pg_catalog.text,
									   scope pg_catalog.text DEFAULT '',
									   force pg_catalog.bool DEFAULT false)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_forget_key'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.forget_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.bool) IS
'delete the record of one key of a role in this database, so that its next request executes; a claim not finished only with force; counted in stats.keys_forgotten';

REVOKE ALL ON FUNCTION idempotency.forget_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.bool) FROM PUBLIC;
