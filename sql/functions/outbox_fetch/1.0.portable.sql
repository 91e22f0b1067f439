/*
 * outbox.c's outbox_fetch, in PL/pgSQL, with its statement: the first
 * undelivered message of each of the caller's ordering keys, found by a
 * loose scan of the index of undelivered messages, those no live lease
 * holds locked with FOR UPDATE SKIP LOCKED and leased under one new
 * fencing attempt from the sequence.  The scan starts after the last key
 * this session handed out (kept in the session's setting
 * idempotency_portable.outbox_cursor, a hint for fairness only) and wraps
 * around.  The body is SECURITY DEFINER; outbox_fetch() passes it its
 * caller.
 */
CREATE FUNCTION idempotency.portable_outbox_fetch(caller pg_catalog.name,
												  p_batch_size pg_catalog.int4,
												  p_lease pg_catalog.interval,
												  OUT message_id pg_catalog.text,
												  OUT topic pg_catalog.text,
												  OUT ordering_key pg_catalog.text,
												  OUT payload pg_catalog.jsonb,
												  OUT headers pg_catalog.jsonb,
												  OUT sent_at pg_catalog.timestamptz,
												  OUT attempt pg_catalog.int8,
												  OUT deliveries pg_catalog.int4,
												  OUT lease_until pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	v_until pg_catalog.timestamptz;
	v_attempt pg_catalog.int8;
	v_cursor pg_catalog.text := COALESCE(pg_catalog.current_setting('idempotency_portable.outbox_cursor', true), '');
	v_last pg_catalog.text;
	v_handed pg_catalog.int4 := 0;
	v_pass pg_catalog.int4;
BEGIN
	IF p_batch_size IS NULL THEN
		RAISE EXCEPTION 'batch_size must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF p_batch_size NOT BETWEEN 1 AND 10000 THEN
		RAISE EXCEPTION 'batch_size must be between 1 and %', 10000 USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF p_lease IS NULL THEN
		RAISE EXCEPTION 'lease must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	v_owner := idempotency.portable_owner(caller, 'idempotency.outbox_fetch(pg_catalog.int4, pg_catalog.interval)');
	v_now := pg_catalog.clock_timestamp();
	v_until := idempotency.portable_after(v_now, p_lease, 'lease');
	v_attempt := pg_catalog.nextval('idempotency.outbox_attempt_seq'::pg_catalog.regclass);

	-- the keys after the cursor; then, short of a batch, from the first key
	-- up to the cursor (the keys just handed out are leased now)
	FOR pass IN 1 .. 2 LOOP
		EXIT WHEN pass OPERATOR(pg_catalog.=) 2 AND (v_cursor OPERATOR(pg_catalog.=) '' OR v_handed OPERATOR(pg_catalog.>=) p_batch_size);
		v_pass := 0;
		FOR message_id, topic, ordering_key, payload, headers, sent_at, attempt, deliveries, lease_until IN
			WITH RECURSIVE heads (ordering_key, seq) AS (
				(SELECT p.ordering_key, p.seq FROM idempotency.outbox AS p
				  WHERE p.owner OPERATOR(pg_catalog.=) v_owner
					AND p.ordering_key OPERATOR(pg_catalog.>) CASE pass WHEN 1 THEN v_cursor ELSE '' END
					AND p.delivered_at IS NULL
					AND (pass OPERATOR(pg_catalog.=) 1 OR p.ordering_key OPERATOR(pg_catalog.<=) v_cursor)
				  ORDER BY p.ordering_key, p.seq LIMIT 1)
				UNION ALL
				SELECT n.ordering_key, n.seq FROM heads AS h, LATERAL
					(SELECT p.ordering_key, p.seq FROM idempotency.outbox AS p
					  WHERE p.owner OPERATOR(pg_catalog.=) v_owner AND p.ordering_key OPERATOR(pg_catalog.>) h.ordering_key
						AND p.delivered_at IS NULL
						AND (pass OPERATOR(pg_catalog.=) 1 OR p.ordering_key OPERATOR(pg_catalog.<=) v_cursor)
					  ORDER BY p.ordering_key, p.seq LIMIT 1) AS n)
			UPDATE idempotency.outbox AS o
			   SET attempt = v_attempt, deliveries = o.deliveries OPERATOR(pg_catalog.+) 1, lease_until = v_until
			 WHERE o.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
					SELECT r.ctid FROM heads AS h, LATERAL
						(SELECT c.ctid FROM idempotency.outbox AS c
						  WHERE c.owner OPERATOR(pg_catalog.=) v_owner
							AND c.ordering_key OPERATOR(pg_catalog.=) h.ordering_key
							AND c.seq OPERATOR(pg_catalog.=) h.seq AND c.delivered_at IS NULL
							AND (c.lease_until IS NULL OR c.lease_until OPERATOR(pg_catalog.<=) v_now)
						  FOR UPDATE OF c SKIP LOCKED) AS r
					LIMIT p_batch_size OPERATOR(pg_catalog.-) v_handed))
			RETURNING o.message_id, o.topic, o.ordering_key, o.payload, o.headers, o.sent_at,
					  o.attempt, o.deliveries, o.lease_until
		LOOP
			IF v_pass OPERATOR(pg_catalog.=) 0 OR ordering_key COLLATE "C" OPERATOR(pg_catalog.>) v_last COLLATE "C" THEN
				v_last := ordering_key;
			END IF;
			v_pass := v_pass OPERATOR(pg_catalog.+) 1;
			RETURN NEXT;
		END LOOP;
		v_handed := v_handed OPERATOR(pg_catalog.+) v_pass;
		IF v_pass OPERATOR(pg_catalog.>) 0 THEN
			PERFORM pg_catalog.set_config('idempotency_portable.outbox_cursor', v_last, false);
		END IF;
	END LOOP;
END
$$;

COMMENT ON FUNCTION idempotency.portable_outbox_fetch(pg_catalog.name, pg_catalog.int4, pg_catalog.interval) IS
'outbox_fetch() for a caller, checked against the session';

CREATE FUNCTION idempotency.outbox_fetch(batch_size pg_catalog.int4 DEFAULT 100,
										 lease pg_catalog.interval DEFAULT '1 minute',
										 OUT message_id pg_catalog.text,
										 OUT topic pg_catalog.text,
										 OUT ordering_key pg_catalog.text,
										 OUT payload pg_catalog.jsonb,
										 OUT headers pg_catalog.jsonb,
										 OUT sent_at pg_catalog.timestamptz,
										 OUT attempt pg_catalog.int8,
										 OUT deliveries pg_catalog.int4,
										 OUT lease_until pg_catalog.timestamptz)
RETURNS SETOF pg_catalog.record
LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	SELECT * FROM idempotency.portable_outbox_fetch(CURRENT_USER, batch_size, lease);
END;

COMMENT ON FUNCTION idempotency.outbox_fetch(pg_catalog.int4, pg_catalog.interval) IS
'hand a relay a batch of ready messages under a lease: the oldest undelivered message of each ordering key';

REVOKE ALL ON FUNCTION idempotency.outbox_fetch(pg_catalog.int4, pg_catalog.interval) FROM PUBLIC;
