/*
 * outbox.c's outbox_ack, in PL/pgSQL: the messages the attempt still
 * holds, marked delivered; those it acknowledged already count as held;
 * any other refuses the call with IK004 and marks nothing.  The body is
 * SECURITY DEFINER; outbox_ack() passes it its caller.
 */
CREATE FUNCTION idempotency.portable_outbox_ack(caller pg_catalog.name,
												p_attempt pg_catalog.int8,
												p_message_ids pg_catalog.text[],
												p_ttl pg_catalog.interval)
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_sorted pg_catalog.text[];
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	v_expires pg_catalog.timestamptz;
	v_newly pg_catalog.text[];
	v_held pg_catalog.text[];
	v_missing pg_catalog.text;
BEGIN
	IF p_attempt IS NULL THEN
		RAISE EXCEPTION 'attempt must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF p_message_ids IS NULL THEN
		RAISE EXCEPTION 'message_ids must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.array_ndims(p_message_ids) OPERATOR(pg_catalog.>) 1 THEN
		RAISE EXCEPTION 'message_ids must be a one-dimensional array' USING ERRCODE = 'array_subscript_error';
	END IF;
	IF pg_catalog.cardinality(p_message_ids) OPERATOR(pg_catalog.>) 10000 THEN
		RAISE EXCEPTION 'a batch of % message ids is too large', pg_catalog.cardinality(p_message_ids)
			USING ERRCODE = 'program_limit_exceeded',
				  DETAIL = 'outbox_ack takes at most 10000 ids at once.';
	END IF;
	IF pg_catalog.array_position(p_message_ids, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'message_ids must not contain nulls' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF p_ttl IS NULL THEN
		RAISE EXCEPTION 'ttl must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.cardinality(p_message_ids) OPERATOR(pg_catalog.=) 0 THEN
		RETURN 0;
	END IF;
	v_sorted := ARRAY(SELECT DISTINCT m.id COLLATE "C" FROM pg_catalog.unnest(p_message_ids) AS m(id) ORDER BY 1);
	v_owner := idempotency.portable_owner(caller, 'idempotency.outbox_ack(pg_catalog.int8, pg_catalog.text[], pg_catalog.interval)');
	v_now := pg_catalog.clock_timestamp();
	v_expires := idempotency.portable_after(v_now, p_ttl, 'ttl');

	WITH d AS (UPDATE idempotency.outbox AS o SET delivered_at = v_now, expires_at = v_expires, lease_until = NULL
				WHERE o.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
						SELECT c.ctid FROM idempotency.outbox AS c
						 WHERE c.message_id OPERATOR(pg_catalog.=) ANY (v_sorted)
						   AND c.owner OPERATOR(pg_catalog.=) v_owner))
				  AND o.attempt OPERATOR(pg_catalog.=) p_attempt
				  AND o.delivered_at IS NULL
			   RETURNING o.message_id)
	SELECT COALESCE(pg_catalog.array_agg(d.message_id), '{}') INTO v_newly FROM d;
	v_held := v_newly;
	IF pg_catalog.cardinality(v_held) OPERATOR(pg_catalog.<) pg_catalog.cardinality(v_sorted) THEN
		v_held := v_held OPERATOR(pg_catalog.||) ARRAY(
			SELECT o.message_id FROM idempotency.outbox AS o
			 WHERE o.message_id OPERATOR(pg_catalog.=) ANY (v_sorted) AND o.owner OPERATOR(pg_catalog.=) v_owner
			   AND o.attempt OPERATOR(pg_catalog.=) p_attempt AND o.delivered_at IS NOT NULL);
	END IF;
	SELECT m.id INTO v_missing FROM pg_catalog.unnest(v_sorted) WITH ORDINALITY AS m(id, n)
	 WHERE m.id OPERATOR(pg_catalog.<>) ALL (v_held) ORDER BY m.n LIMIT 1;
	IF v_missing IS NOT NULL THEN
		RAISE EXCEPTION 'attempt % does not hold message "%"', p_attempt, v_missing
			USING ERRCODE = 'IK004',
				  DETAIL = 'Its lease ran out and it was handed to a later attempt, or it was never handed to this attempt.',
				  HINT = 'Nothing was acknowledged; acknowledge the other messages of the batch again without it.';
	END IF;
	RETURN pg_catalog.cardinality(v_newly);
END
$$;

COMMENT ON FUNCTION idempotency.portable_outbox_ack(pg_catalog.name, pg_catalog.int8, pg_catalog.text[], pg_catalog.interval) IS
'outbox_ack() for a caller, checked against the session';

CREATE FUNCTION idempotency.outbox_ack(attempt pg_catalog.int8,
									   message_ids pg_catalog.text[],
									   ttl pg_catalog.interval DEFAULT '7 days')
RETURNS pg_catalog.int8
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_outbox_ack(CURRENT_USER, attempt, message_ids, ttl);

COMMENT ON FUNCTION idempotency.outbox_ack(pg_catalog.int8, pg_catalog.text[], pg_catalog.interval) IS
'mark messages of a batch delivered, if that batch still holds them; returns how many were newly marked';

REVOKE ALL ON FUNCTION idempotency.outbox_ack(pg_catalog.int8, pg_catalog.text[], pg_catalog.interval) FROM PUBLIC;
