/*
 * What a monitoring role may know of this database's records, inbox and
 * outbox: counts and ages, never a key, a role or an answer.  It runs as the
 * extension's owner, who may read the tables (SECURITY DEFINER with a fixed
 * search_path; every name is qualified), and reads the registry whole, once:
 * scrape it every minute or so, not every second (doc/monitoring.md).  A
 * claim held in memory by an open transaction is a lock of the key
 * (objsubid 21067 in pg_locks), not a row: those are counted from pg_locks,
 * granted and waited for.
 */
CREATE FUNCTION idempotency.metrics(OUT records pg_catalog.int8,
									OUT claims_processing pg_catalog.int8,
									OUT stalled_claims pg_catalog.int8,
									OUT expired_records pg_catalog.int8,
									OUT expired_lag_seconds pg_catalog.float8,
									OUT claims_in_memory pg_catalog.int8,
									OUT claims_waiting pg_catalog.int8,
									OUT inbox_entries pg_catalog.int8,
									OUT outbox_pending pg_catalog.int8,
									OUT outbox_in_flight pg_catalog.int8,
									OUT outbox_pending_age_seconds pg_catalog.float8)
RETURNS record
LANGUAGE plpgsql STABLE SECURITY DEFINER PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	SELECT pg_catalog.count(*),
		   pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'processing'
									   AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()),
		   pg_catalog.count(*) FILTER (WHERE r.status OPERATOR(pg_catalog.=) 'processing'
									   AND r.lease_until OPERATOR(pg_catalog.<) pg_catalog.now()
									   AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.now()),
		   pg_catalog.count(*) FILTER (WHERE r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now()),
		   COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
								pg_catalog.min(r.expires_at) FILTER (WHERE r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now()))::pg_catalog.float8, 0)
	  INTO records, claims_processing, stalled_claims, expired_records, expired_lag_seconds
	  FROM idempotency.registry AS r;

	SELECT pg_catalog.count(*) FILTER (WHERE l.granted),
		   pg_catalog.count(*) FILTER (WHERE NOT l.granted)
	  INTO claims_in_memory, claims_waiting
	  FROM pg_catalog.pg_locks AS l
	 WHERE l.locktype OPERATOR(pg_catalog.=) 'advisory'
	   AND l.database OPERATOR(pg_catalog.=) (SELECT d.oid FROM pg_catalog.pg_database AS d
											   WHERE d.datname OPERATOR(pg_catalog.=) pg_catalog.current_database())
	   AND l.objsubid OPERATOR(pg_catalog.=) 21067;

	SELECT pg_catalog.count(*) INTO inbox_entries FROM idempotency.inbox AS i;

	SELECT pg_catalog.count(*),
		   pg_catalog.count(*) FILTER (WHERE o.lease_until OPERATOR(pg_catalog.>) pg_catalog.now()),
		   COALESCE(pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)
								pg_catalog.min(o.sent_at))::pg_catalog.float8, 0)
	  INTO outbox_pending, outbox_in_flight, outbox_pending_age_seconds
	  FROM idempotency.outbox AS o
	 WHERE o.delivered_at IS NULL;
END;
$$;

COMMENT ON FUNCTION idempotency.metrics() IS
'counts and ages of this database''s records, claims, inbox and outbox, for monitoring (behind the metrics view)';

REVOKE ALL ON FUNCTION idempotency.metrics() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION idempotency.metrics() TO pg_monitor;
