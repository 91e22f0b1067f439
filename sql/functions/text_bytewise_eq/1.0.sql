CREATE FUNCTION idempotency.text_bytewise_eq(pg_catalog.text, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_bytewise_eq(pg_catalog.text, pg_catalog.text) IS
'implementation of ~=~: two text values equal byte for byte, as keys compare';
