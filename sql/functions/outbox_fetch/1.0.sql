CREATE FUNCTION idempotency.outbox_fetch(batch_size pg_catalog.int4 DEFAULT 100,
										 lease pg_catalog.interval DEFAULT '1 minute',
										 OUT message_id pg_catalog.text,
										 OUT topic pg_catalog.text,
										 OUT ordering_key pg_catalog.text,
										 OUT payload pg_catalog.jsonb,
										 OUT headers pg_catalog.jsonb,
										 OUT sent_at pg_catalog.timestamptz,
										 OUT attempt pg_catalog.int8,
										 OUT deliveries pg_catalog.int4,
										 OUT lease_until pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_outbox_fetch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.outbox_fetch(pg_catalog.int4, pg_catalog.interval) IS
'hand a relay a batch of ready messages under a lease: the oldest undelivered message of each ordering key';

REVOKE ALL ON FUNCTION idempotency.outbox_fetch(pg_catalog.int4, pg_catalog.interval) FROM PUBLIC;
