CREATE FUNCTION idempotency.citus_my_records(OUT key idempotency.key,
											 OUT scope pg_catalog.text,
											 OUT status pg_catalog.text,
											 OUT attempt pg_catalog.int4,
											 OUT created_at pg_catalog.timestamptz,
											 OUT updated_at pg_catalog.timestamptz,
											 OUT lease_until pg_catalog.timestamptz,
											 OUT expires_at pg_catalog.timestamptz,
											 OUT expired pg_catalog.bool,
											 OUT response pg_catalog.jsonb,
											 OUT status_code pg_catalog.int4,
											 OUT body pg_catalog.bytea,
											 OUT headers pg_catalog.jsonb,
											 OUT fingerprint pg_catalog.bytea,
											 OUT recovery_point pg_catalog.text,
											 OUT recovery_state pg_catalog.jsonb)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_records'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_records() IS
'the calling role''s records, read as the registry''s owner (my_records under Citus)';
