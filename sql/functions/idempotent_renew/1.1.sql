/*
 * idempotent_renew: extend a running claim's lease; returns the new
 * lease_until.
 */
CREATE FUNCTION idempotency.idempotent_renew(key pg_catalog.text,
											 lease pg_catalog.interval,
											 scope pg_catalog.text DEFAULT '',
											 attempt pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'idempotency_idempotent_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) IS
'extend the lease of a running claim so that it is not taken over; returns the new lease_until';

REVOKE ALL ON FUNCTION idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
