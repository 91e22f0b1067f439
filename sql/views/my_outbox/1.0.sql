/* a role's own messages, and where each stands */
CREATE VIEW idempotency.my_outbox WITH (security_barrier) AS
	SELECT o.message_id, o.topic, o.ordering_key::pg_catalog.text AS ordering_key, o.seq,
		   o.payload, o.headers, o.sent_at,
		   o.attempt, o.deliveries, o.lease_until, o.delivered_at, o.expires_at,
		   CASE WHEN o.delivered_at IS NOT NULL THEN 'delivered'
				WHEN o.lease_until OPERATOR(pg_catalog.>) pg_catalog.now() THEN 'leased'
				ELSE 'pending' END AS state
	  FROM idempotency.outbox AS o
	 WHERE o.owner OPERATOR(pg_catalog.=) idempotency.owner_name();

COMMENT ON VIEW idempotency.my_outbox IS
'the calling role''s outbox messages, and whether each is pending, leased or delivered';

REVOKE ALL ON TABLE idempotency.my_outbox FROM PUBLIC;
