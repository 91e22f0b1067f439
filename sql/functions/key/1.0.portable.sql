/*
 * key(text): the text as a key; the domain's check applies the key type's
 * rules (portable_key_check).
 */
CREATE FUNCTION idempotency.key(pg_catalog.text)
RETURNS idempotency.key
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN $1;

COMMENT ON FUNCTION idempotency.key(pg_catalog.text) IS 'a text as an idempotency key, checked';
