CREATE FUNCTION idempotency.lookup(key pg_catalog.text,
								   scope pg_catalog.text DEFAULT '',
								   request pg_catalog.jsonb DEFAULT NULL,
								   OUT found pg_catalog.bool,
								   OUT status pg_catalog.text,
								   OUT response pg_catalog.jsonb,
								   OUT status_code pg_catalog.int4,
								   OUT body pg_catalog.bytea,
								   OUT headers pg_catalog.jsonb,
								   OUT attempt pg_catalog.int4,
								   OUT expires_at pg_catalog.timestamptz,
								   OUT lease_until pg_catalog.timestamptz,
								   OUT request_matches pg_catalog.bool)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_lookup'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) IS
'read the caller''s live record of a key without claiming it';

REVOKE ALL ON FUNCTION idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) FROM PUBLIC;
