CREATE OR REPLACE VIEW idempotency.my_outbox WITH (security_barrier) AS
	SELECT o.message_id COLLATE pg_catalog."C" AS message_id,
		   o.topic COLLATE pg_catalog."C" AS topic,
		   o.ordering_key COLLATE pg_catalog."C" AS ordering_key, o.seq, o.payload,
		   o.headers, o.sent_at, o.attempt, o.deliveries, o.lease_until,
		   o.delivered_at, o.expires_at,
		   CASE WHEN o.delivered_at IS NOT NULL THEN 'delivered'
				WHEN o.lease_until OPERATOR(pg_catalog.>) pg_catalog.now() THEN 'leased'
				ELSE 'pending' END AS state
	  FROM idempotency.citus_my_outbox() AS o;
