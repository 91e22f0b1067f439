/*
 * inbox.c's inbox_receive_batch, in PL/pgSQL: the ids not seen before, in
 * input order, each once; recorded in sorted order, as the C edition does,
 * so that two batches that share ids lock them in one order.
 */
CREATE FUNCTION idempotency.portable_inbox_receive_batch(caller pg_catalog.name,
														 consumer pg_catalog.text,
														 message_ids pg_catalog.text[],
														 ttl pg_catalog.interval)
RETURNS SETOF pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_consumer pg_catalog.text := idempotency.portable_text_arg(portable_inbox_receive_batch.consumer, 'consumer');
	v_ids pg_catalog.text[] := portable_inbox_receive_batch.message_ids;
	v_sorted pg_catalog.text[];
	v_new pg_catalog.text[];
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	v_expires pg_catalog.timestamptz;
BEGIN
	IF v_ids IS NULL THEN
		RAISE EXCEPTION 'message_ids must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.array_ndims(v_ids) OPERATOR(pg_catalog.>) 1 THEN
		RAISE EXCEPTION 'message_ids must be a one-dimensional array' USING ERRCODE = 'array_subscript_error';
	END IF;
	IF pg_catalog.cardinality(v_ids) OPERATOR(pg_catalog.>) 10000 THEN
		RAISE EXCEPTION 'a batch of % message ids is too large', pg_catalog.cardinality(v_ids)
			USING ERRCODE = 'program_limit_exceeded',
				  DETAIL = 'inbox_receive_batch takes at most 10000 ids at once.';
	END IF;
	IF pg_catalog.array_position(v_ids, NULL) IS NOT NULL THEN
		RAISE EXCEPTION 'message_ids must not contain nulls' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF EXISTS (SELECT FROM pg_catalog.unnest(v_ids) AS m(id)
				WHERE pg_catalog.octet_length(m.id) OPERATOR(pg_catalog.=) 0
				   OR pg_catalog.octet_length(m.id) OPERATOR(pg_catalog.>) 255) THEN
		RAISE EXCEPTION 'message_id must be 1 to 255 bytes long' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF pg_catalog.cardinality(v_ids) OPERATOR(pg_catalog.=) 0 THEN
		RETURN;
	END IF;
	v_sorted := ARRAY(SELECT DISTINCT m.id COLLATE "C" FROM pg_catalog.unnest(v_ids) AS m(id) ORDER BY 1);
	v_owner := idempotency.portable_owner(caller, 'idempotency.inbox_receive_batch(pg_catalog.text, pg_catalog.text[], pg_catalog.interval)');
	v_now := pg_catalog.clock_timestamp();
	v_expires := idempotency.portable_after(v_now, portable_inbox_receive_batch.ttl, 'ttl');

	-- the new ids; then the expired among the others, renewed; then any
	-- the cleanup deleted between the two
	WITH n AS (INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)
			   SELECT v_owner, v_consumer, m.id, v_now, v_expires FROM pg_catalog.unnest(v_sorted) AS m(id)
			   ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING RETURNING i.message_id)
	SELECT pg_catalog.array_agg(n.message_id) INTO v_new FROM n;
	IF COALESCE(pg_catalog.cardinality(v_new), 0) OPERATOR(pg_catalog.<) pg_catalog.cardinality(v_sorted) THEN
		WITH n AS (UPDATE idempotency.inbox AS i SET received_at = v_now, expires_at = v_expires
					WHERE i.message_id OPERATOR(pg_catalog.=) ANY (v_sorted)
					  AND i.consumer OPERATOR(pg_catalog.=) v_consumer AND i.owner OPERATOR(pg_catalog.=) v_owner
					  AND i.expires_at OPERATOR(pg_catalog.<=) v_now
				   RETURNING i.message_id)
		SELECT COALESCE(v_new, '{}') OPERATOR(pg_catalog.||) COALESCE(pg_catalog.array_agg(n.message_id), '{}') INTO v_new FROM n;
	END IF;
	IF COALESCE(pg_catalog.cardinality(v_new), 0) OPERATOR(pg_catalog.<) pg_catalog.cardinality(v_sorted) THEN
		WITH n AS (INSERT INTO idempotency.inbox AS i (owner, consumer, message_id, received_at, expires_at)
				   SELECT v_owner, v_consumer, m.id, v_now, v_expires FROM pg_catalog.unnest(v_sorted) AS m(id)
				   ON CONFLICT ON CONSTRAINT inbox_pkey DO NOTHING RETURNING i.message_id)
		SELECT COALESCE(v_new, '{}') OPERATOR(pg_catalog.||) COALESCE(pg_catalog.array_agg(n.message_id), '{}') INTO v_new FROM n;
	END IF;

	RETURN QUERY
		SELECT f.id FROM (SELECT DISTINCT ON (m.id COLLATE "C") m.id, m.n
							FROM pg_catalog.unnest(v_ids) WITH ORDINALITY AS m(id, n)
						   WHERE m.id OPERATOR(pg_catalog.=) ANY (v_new)
						   ORDER BY m.id COLLATE "C", m.n) AS f
		 ORDER BY f.n;
END
$$;

COMMENT ON FUNCTION idempotency.portable_inbox_receive_batch(pg_catalog.name, pg_catalog.text, pg_catalog.text[], pg_catalog.interval) IS
'inbox_receive_batch() for a caller, checked against the session';

CREATE FUNCTION idempotency.inbox_receive_batch(consumer pg_catalog.text,
												message_ids pg_catalog.text[],
												ttl pg_catalog.interval DEFAULT '7 days')
RETURNS SETOF pg_catalog.text
LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	SELECT * FROM idempotency.portable_inbox_receive_batch(CURRENT_USER, consumer, message_ids, ttl);
END;

COMMENT ON FUNCTION idempotency.inbox_receive_batch(pg_catalog.text, pg_catalog.text[], pg_catalog.interval) IS
'the message ids a consumer has not seen before, in input order, each once';

REVOKE ALL ON FUNCTION idempotency.inbox_receive_batch(pg_catalog.text, pg_catalog.text[], pg_catalog.interval) FROM PUBLIC;
