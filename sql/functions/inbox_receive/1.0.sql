CREATE FUNCTION idempotency.inbox_receive(consumer pg_catalog.text,
										  message_id pg_catalog.text,
										  ttl pg_catalog.interval DEFAULT '7 days')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_inbox_receive'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.inbox_receive(pg_catalog.text, pg_catalog.text, pg_catalog.interval) IS
'true the first time a consumer sees a message id, false for a redelivery';

REVOKE ALL ON FUNCTION idempotency.inbox_receive(pg_catalog.text, pg_catalog.text, pg_catalog.interval) FROM PUBLIC;
