/*
 * The caller's messages, read as the outbox's owner: citus_setup() points
 * my_outbox at this, as it points my_records and my_tokens at theirs (Citus
 * checks shard privileges as the caller).  Left to PUBLIC like them.
 */
CREATE FUNCTION idempotency.citus_my_outbox(OUT message_id pg_catalog.text,
											OUT topic pg_catalog.text,
											OUT ordering_key pg_catalog.text,
											OUT seq pg_catalog.int8,
											OUT payload pg_catalog.jsonb,
											OUT headers pg_catalog.jsonb,
											OUT sent_at pg_catalog.timestamptz,
											OUT attempt pg_catalog.int8,
											OUT deliveries pg_catalog.int4,
											OUT lease_until pg_catalog.timestamptz,
											OUT delivered_at pg_catalog.timestamptz,
											OUT expires_at pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_outbox'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_outbox() IS
'the calling role''s outbox messages, read as the outbox''s owner (my_outbox under Citus)';
