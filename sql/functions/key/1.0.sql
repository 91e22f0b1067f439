CREATE FUNCTION idempotency.key(pg_catalog.text)
RETURNS idempotency.key
AS 'MODULE_PATHNAME', 'key_from_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.key(pg_catalog.text) IS 'a text as an idempotency key, checked';
