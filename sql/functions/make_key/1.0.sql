CREATE FUNCTION idempotency.make_key(prefix pg_catalog.text,
									 business_id pg_catalog.text,
									 operation pg_catalog.text,
									 version pg_catalog.text DEFAULT 'v1')
RETURNS idempotency.key
AS 'MODULE_PATHNAME', 'idempotency_make_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.make_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'build the structured key prefix:business_id:operation:version:checksum';
