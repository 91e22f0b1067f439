/*
 * cleanup.c's cleanup, in PL/pgSQL: one batch of expired rows, the
 * registry's first, then expired inbox entries, tokens, delivered outbox
 * messages and state history with what is left of the batch, each oldest
 * first, SKIP LOCKED past what a live transaction holds.  Without a
 * background worker, this is how the portable edition expires anything: an
 * application or a scheduler calls it (pg_cron: doc/portable.md), and how
 * often bounds the rate, and so does idempotency.cleanup_max_rows_per_second
 * (the C edition's worker's cap, default 10000, 0 for none): a call without
 * a batch_size, as a scheduler makes it, deletes at most that many rows per
 * second since the last call that ran, and returns 0 while another call
 * runs, so that a scheduler that calls it often, or several, spread a
 * backlog's deletes as the worker does; a call that names its batch_size
 * is an administrator's, uncapped as the C edition's is.  As sweep.c does, the registry is swept in heap
 * order from where the last call stopped (kept in portable_cleanup), a
 * Tid Range Scan of 1024 blocks at a time, instead of through an index on
 * expires_at that every claim would have to maintain; and a record whose
 * last attempt was issued within the last two seconds stays, so that the
 * next claim of its key starts above every attempt it had.  SECURITY
 * DEFINER: the caller needs no privilege on the tables; revoked from
 * PUBLIC.
 */
CREATE TABLE idempotency.portable_cleanup (
	next_block	pg_catalog.int8 NOT NULL,
	last_run	pg_catalog.timestamptz
);

COMMENT ON TABLE idempotency.portable_cleanup IS
'where the last cleanup() stopped its sweep of the registry, and when it ran';

REVOKE ALL ON TABLE idempotency.portable_cleanup FROM PUBLIC;
INSERT INTO idempotency.portable_cleanup (next_block) VALUES (0);

CREATE FUNCTION idempotency.cleanup(batch_size pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_batch pg_catalog.int8 := COALESCE(cleanup.batch_size,
										idempotency.portable_setting('idempotency.cleanup_batch_size', '', 10000, 1, 1000000));
	v_rate pg_catalog.int8 := idempotency.portable_setting('idempotency.cleanup_max_rows_per_second', '', 10000, 0, 2147483647);
	v_last_run pg_catalog.timestamptz;
	v_now pg_catalog.timestamptz := pg_catalog.clock_timestamp();
	v_fence pg_catalog.int4 := idempotency.portable_fence() OPERATOR(pg_catalog.-) 1;
	v_blocks pg_catalog.int8;
	v_pos pg_catalog.int8;
	v_to pg_catalog.int8;
	v_swept pg_catalog.int8 := 0;
	v_deleted pg_catalog.int8 := 0;
	v_last pg_catalog.tid;
	n pg_catalog.int8;
BEGIN
	IF v_batch OPERATOR(pg_catalog.<=) 0 THEN
		RAISE EXCEPTION 'batch_size must be greater than zero' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	v_blocks := pg_catalog.pg_relation_size('idempotency.registry'::pg_catalog.regclass)
				OPERATOR(pg_catalog./) pg_catalog.current_setting('block_size')::pg_catalog.int8;
	-- one call at a time: another one running has this row
	IF cleanup.batch_size IS NOT NULL THEN
		SELECT c.next_block INTO v_pos FROM idempotency.portable_cleanup AS c FOR UPDATE;
	ELSE
		SELECT c.next_block, c.last_run INTO v_pos, v_last_run FROM idempotency.portable_cleanup AS c
		   FOR UPDATE SKIP LOCKED;
		IF NOT FOUND THEN
			RETURN 0;
		END IF;
	END IF;
	IF v_rate OPERATOR(pg_catalog.>) 0 AND v_last_run IS NOT NULL THEN
		v_batch := LEAST(v_batch, pg_catalog.floor(GREATEST(pg_catalog.date_part('epoch', v_now OPERATOR(pg_catalog.-) v_last_run), 0)
													OPERATOR(pg_catalog.*) v_rate)::pg_catalog.int8);
		IF v_batch OPERATOR(pg_catalog.<) 1 THEN
			-- too soon: the time until the next call counts from the last one that ran
			RETURN 0;
		END IF;
	END IF;
	IF v_pos IS NULL OR v_pos OPERATOR(pg_catalog.>=) v_blocks THEN
		v_pos := 0;
	END IF;
	WHILE v_deleted OPERATOR(pg_catalog.<) v_batch AND v_swept OPERATOR(pg_catalog.<) v_blocks LOOP
		v_to := LEAST(v_pos OPERATOR(pg_catalog.+) 1024, v_blocks);
		WITH d AS (DELETE FROM idempotency.registry AS r
					WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
						SELECT e.ctid FROM idempotency.registry AS e
						 WHERE e.ctid OPERATOR(pg_catalog.>=) pg_catalog.format('(%s,0)', v_pos)::pg_catalog.tid
						   AND e.ctid OPERATOR(pg_catalog.<) pg_catalog.format('(%s,0)', v_to)::pg_catalog.tid
						   AND e.expires_at OPERATOR(pg_catalog.<=) v_now
						   AND e.attempt OPERATOR(pg_catalog.<) v_fence
						 LIMIT v_batch OPERATOR(pg_catalog.-) v_deleted FOR UPDATE SKIP LOCKED))
				   RETURNING r.ctid)
		SELECT pg_catalog.count(*), pg_catalog.max(d.ctid) INTO n, v_last FROM d;
		v_deleted := v_deleted OPERATOR(pg_catalog.+) n;
		IF v_deleted OPERATOR(pg_catalog.>=) v_batch THEN
			-- the batch ended inside the range: go on from its last block
			v_pos := (pg_catalog.split_part(pg_catalog.ltrim(v_last::pg_catalog.text, '('), ',', 1))::pg_catalog.int8;
		ELSE
			v_swept := v_swept OPERATOR(pg_catalog.+) (v_to OPERATOR(pg_catalog.-) v_pos);
			v_pos := CASE WHEN v_to OPERATOR(pg_catalog.>=) v_blocks THEN 0 ELSE v_to END;
		END IF;
	END LOOP;
	UPDATE idempotency.portable_cleanup SET next_block = v_pos, last_run = v_now;

	-- claims' rows of transactions that ended with them open (external
	-- claims committed, prepared transactions resolved): nobody's now
	DELETE FROM idempotency.portable_claims AS c
	 WHERE pg_catalog.pg_xact_status(c.xact) IS DISTINCT FROM 'in progress';

	IF v_deleted OPERATOR(pg_catalog.<) v_batch THEN
		DELETE FROM idempotency.inbox AS i
		 USING (SELECT e.message_id, e.consumer, e.owner FROM idempotency.inbox AS e
				 WHERE e.expires_at OPERATOR(pg_catalog.<=) v_now
				 ORDER BY e.expires_at LIMIT v_batch OPERATOR(pg_catalog.-) v_deleted FOR UPDATE SKIP LOCKED) AS x
		 WHERE i.message_id OPERATOR(pg_catalog.=) x.message_id AND i.consumer OPERATOR(pg_catalog.=) x.consumer
		   AND i.owner OPERATOR(pg_catalog.=) x.owner;
		GET DIAGNOSTICS n = ROW_COUNT;
		v_deleted := v_deleted OPERATOR(pg_catalog.+) n;
	END IF;
	IF v_deleted OPERATOR(pg_catalog.<) v_batch THEN
		DELETE FROM idempotency.tokens AS t
		 USING (SELECT e.token, e.scope, e.owner FROM idempotency.tokens AS e
				 WHERE e.expires_at OPERATOR(pg_catalog.<=) v_now
				 ORDER BY e.expires_at LIMIT v_batch OPERATOR(pg_catalog.-) v_deleted FOR UPDATE SKIP LOCKED) AS x
		 WHERE t.token OPERATOR(pg_catalog.=) x.token AND t.scope OPERATOR(pg_catalog.=) x.scope
		   AND t.owner OPERATOR(pg_catalog.=) x.owner;
		GET DIAGNOSTICS n = ROW_COUNT;
		v_deleted := v_deleted OPERATOR(pg_catalog.+) n;
	END IF;
	IF v_deleted OPERATOR(pg_catalog.<) v_batch THEN
		DELETE FROM idempotency.outbox AS o
		 USING (SELECT e.message_id, e.ordering_key, e.owner FROM idempotency.outbox AS e
				 WHERE e.expires_at OPERATOR(pg_catalog.<=) v_now
				 ORDER BY e.expires_at LIMIT v_batch OPERATOR(pg_catalog.-) v_deleted FOR UPDATE SKIP LOCKED) AS x
		 WHERE o.message_id OPERATOR(pg_catalog.=) x.message_id AND o.ordering_key OPERATOR(pg_catalog.=) x.ordering_key
		   AND o.owner OPERATOR(pg_catalog.=) x.owner;
		GET DIAGNOSTICS n = ROW_COUNT;
		v_deleted := v_deleted OPERATOR(pg_catalog.+) n;
	END IF;
	IF v_deleted OPERATOR(pg_catalog.<) v_batch THEN
		DELETE FROM idempotency.state_history AS h
		 WHERE h.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
			SELECT e.ctid FROM idempotency.state_history AS e
			 WHERE e.expires_at OPERATOR(pg_catalog.<=) v_now
			 ORDER BY e.expires_at LIMIT v_batch OPERATOR(pg_catalog.-) v_deleted FOR UPDATE SKIP LOCKED));
		GET DIAGNOSTICS n = ROW_COUNT;
		v_deleted := v_deleted OPERATOR(pg_catalog.+) n;
	END IF;
	RETURN v_deleted;
END
$$;

COMMENT ON FUNCTION idempotency.cleanup(pg_catalog.int4) IS
'delete one batch of expired records, oldest first; returns how many';

REVOKE ALL ON FUNCTION idempotency.cleanup(pg_catalog.int4) FROM PUBLIC;
