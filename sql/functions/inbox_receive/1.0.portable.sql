/*
 * inbox.c's inbox_receive, in PL/pgSQL: the same three statements (record,
 * or renew an expired entry, or record once more one the cleanup deleted
 * between the two); the unique index makes a concurrent receive of the id
 * wait for the first and then see it, as in the C edition.
 */
CREATE FUNCTION idempotency.portable_inbox_receive(caller pg_catalog.name,
												   consumer pg_catalog.text,
												   message_id pg_catalog.text,
												   ttl pg_catalog.interval)
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_consumer pg_catalog.text := idempotency.portable_text_arg(portable_inbox_receive.consumer, 'consumer');
	v_id pg_catalog.text := idempotency.portable_text_arg(portable_inbox_receive.message_id, 'message_id');
	v_owner pg_catalog.text := idempotency.portable_owner(caller, 'idempotency.inbox_receive(pg_catalog.text, pg_catalog.text, pg_catalog.interval)');
	v_now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
	v_expires pg_catalog.timestamptz := idempotency.portable_after(v_now, portable_inbox_receive.ttl, 'ttl');
	n pg_catalog.int8;
BEGIN
	INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)
	VALUES (v_owner, v_consumer, v_id, v_now, v_expires) ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING;
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		UPDATE idempotency.inbox AS i SET received_at = v_now, expires_at = v_expires
		 WHERE i.message_id OPERATOR(pg_catalog.=) v_id AND i.consumer OPERATOR(pg_catalog.=) v_consumer
		   AND i.owner OPERATOR(pg_catalog.=) v_owner AND i.expires_at OPERATOR(pg_catalog.<=) v_now;
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)
		VALUES (v_owner, v_consumer, v_id, v_now, v_expires) ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING;
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	RETURN n OPERATOR(pg_catalog.=) 1;
END
$$;

COMMENT ON FUNCTION idempotency.portable_inbox_receive(pg_catalog.name, pg_catalog.text, pg_catalog.text, pg_catalog.interval) IS
'inbox_receive() for a caller, checked against the session';

CREATE FUNCTION idempotency.inbox_receive(consumer pg_catalog.text,
										  message_id pg_catalog.text,
										  ttl pg_catalog.interval DEFAULT '7 days')
RETURNS pg_catalog.bool
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_inbox_receive(CURRENT_USER, consumer, message_id, ttl);

COMMENT ON FUNCTION idempotency.inbox_receive(pg_catalog.text, pg_catalog.text, pg_catalog.interval) IS
'true the first time a consumer sees a message id, false for a redelivery';

REVOKE ALL ON FUNCTION idempotency.inbox_receive(pg_catalog.text, pg_catalog.text, pg_catalog.interval) FROM PUBLIC;
