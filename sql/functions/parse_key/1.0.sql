/*
 * parse_key takes text, as every function taking a key does: a text or
 * varchar value needs no cast, and an idempotency.key passes through its
 * implicit cast to text.  The key type's rules are applied to it.
 */
CREATE FUNCTION idempotency.parse_key(key pg_catalog.text,
									  OUT prefix pg_catalog.text,
									  OUT business_id pg_catalog.text,
									  OUT operation pg_catalog.text,
									  OUT version pg_catalog.text,
									  OUT checksum pg_catalog.text,
									  OUT checksum_ok pg_catalog.bool)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_parse_key'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 1;

COMMENT ON FUNCTION idempotency.parse_key(pg_catalog.text) IS
'split a structured key into its parts and check its checksum; no row for an opaque key';
