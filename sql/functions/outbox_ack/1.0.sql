CREATE FUNCTION idempotency.outbox_ack(attempt pg_catalog.int8,
									   message_ids pg_catalog.text[],
									   ttl pg_catalog.interval DEFAULT '7 days')
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_outbox_ack'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.outbox_ack(pg_catalog.int8, pg_catalog.text[], pg_catalog.interval) IS
'mark messages of a batch delivered, if that batch still holds them; returns how many were newly marked';

REVOKE ALL ON FUNCTION idempotency.outbox_ack(pg_catalog.int8, pg_catalog.text[], pg_catalog.interval) FROM PUBLIC;
