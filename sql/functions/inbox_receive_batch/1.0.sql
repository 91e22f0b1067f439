CREATE FUNCTION idempotency.inbox_receive_batch(consumer pg_catalog.text,
												message_ids pg_catalog.text[],
												ttl pg_catalog.interval DEFAULT '7 days')
RETURNS SETOF pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_inbox_receive_batch'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.inbox_receive_batch(pg_catalog.text, pg_catalog.text[], pg_catalog.interval) IS
'the message ids a consumer has not seen before, in input order, each once';

REVOKE ALL ON FUNCTION idempotency.inbox_receive_batch(pg_catalog.text, pg_catalog.text[], pg_catalog.interval) FROM PUBLIC;
