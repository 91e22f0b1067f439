CREATE FUNCTION idempotency.idempotent_finish(key pg_catalog.text,
											  response pg_catalog.jsonb,
											  scope pg_catalog.text DEFAULT '',
											  attempt pg_catalog.int4 DEFAULT NULL,
											  failed pg_catalog.bool DEFAULT false,
											  status_code pg_catalog.int4 DEFAULT NULL,
											  body pg_catalog.bytea DEFAULT NULL,
											  ttl pg_catalog.interval DEFAULT NULL,
											  headers pg_catalog.jsonb DEFAULT NULL)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) IS
'store the response of a claimed key, to be replayed to every retry; returns the status stored, completed or failed';

REVOKE ALL ON FUNCTION idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) FROM PUBLIC;
