/*
 * The caller's records and tokens, read as the tables' owner, as every C
 * function reads them.  citus_setup() points my_records and my_tokens at
 * these: Citus checks shard privileges as the caller, who has none.  They
 * return only the caller's own rows, so, like the pure functions, they are
 * left to PUBLIC; reading the views still takes a grant.
 */
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
											 OUT fingerprint pg_catalog.bytea)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_records'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_records() IS
'the calling role''s records, read as the registry''s owner (my_records under Citus)';
