CREATE FUNCTION idempotency.outbox_send(topic pg_catalog.text,
										payload pg_catalog.jsonb,
										ordering_key pg_catalog.text DEFAULT NULL,
										headers pg_catalog.jsonb DEFAULT NULL,
										message_id pg_catalog.text DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_outbox_send'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.outbox_send(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text) IS
'record a message in the calling transaction, delivered if and only if it commits; returns the message id';

REVOKE ALL ON FUNCTION idempotency.outbox_send(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text) FROM PUBLIC;
