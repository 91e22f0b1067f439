--
-- The registry's cleanup sweeps the heap by block ranges (src/sweep.c)
-- instead of reading an expires_at index: expired records spread over
-- thousands of pages, more than one range (4096 blocks), are deleted and
-- no live one; a call cut short by its batch size is resumed where it
-- stopped; a call that deletes fewer than its batch size has swept the whole
-- heap once, wrapping from its end to block 0.  (SKIP LOCKED: the isolation
-- spec cleanup_vs_claim; the background worker's paced sweep:
-- test/tap/002_cleanup_worker.pl.)  The background worker is off in this
-- suite, so the position is this backend's.
--
SET search_path = public;

-- the registry's only index is its primary key
SELECT indexrelid::regclass AS index FROM pg_index
 WHERE indrelid = 'idempotency.registry'::regclass;

-- 20,000 records, three to a page (a body of 1,800 bytes), every third one
-- expired: one expired record on each of about 6,700 pages.  The attempts lie
-- a minute behind the clock, past the fencing margin (RegistryFence).
INSERT INTO idempotency.registry
       (owner, scope, key, status, attempt, body, created_at, updated_at, expires_at)
SELECT 'regress_sweep', '', ('sweep-' || i)::idempotency.key, 'completed',
       (extract(epoch FROM now() - timestamptz '2000-01-01 00:00:00+00') - 60)::int4,
       pg_catalog.convert_to(repeat('x', 1800), 'UTF8'), now(), now(),
       CASE WHEN i % 3 = 0 THEN now() - interval '1 hour' ELSE now() + interval '1 hour' END
  FROM generate_series(1, 20000) AS i;
SELECT pg_relation_size('idempotency.registry') / current_setting('block_size')::int > 4096 AS more_than_one_range;

-- what one call of the sweep runs per range (sweep_stmt in src/sweep.c):
-- a Tid Range Scan of the range, no index (the plan's scans only: how
-- EXPLAIN prints the rest differs between majors)
ANALYZE idempotency.registry;
CREATE FUNCTION pg_temp.sweep_scans() RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXPLAIN (COSTS OFF)
		WITH d AS (DELETE FROM idempotency.registry AS r
		 WHERE r.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(
		   SELECT e.ctid FROM idempotency.registry AS e
		    WHERE e.ctid OPERATOR(pg_catalog.>=) '(0,0)'::tid
		    AND e.ctid OPERATOR(pg_catalog.<) '(4096,0)'::tid
		    AND e.expires_at OPERATOR(pg_catalog.<=) now()
		    AND e.attempt OPERATOR(pg_catalog.<) 1000
		    LIMIT 10000 FOR UPDATE SKIP LOCKED))
		 RETURNING r.ctid)
		SELECT pg_catalog.count(*), pg_catalog.max(d.ctid) FROM d
	LOOP
		IF line ~ 'Scan on|TID Cond: \(\(ctid >=' THEN
			RETURN NEXT regexp_replace(line, '^[ >-]*', '');
		END IF;
	END LOOP;
END $$;
SELECT * FROM pg_temp.sweep_scans();

CREATE TEMP VIEW sweep_counts AS
SELECT count(*) FILTER (WHERE expires_at <= now()) AS expired,
       count(*) FILTER (WHERE expires_at > now()) AS live
  FROM idempotency.registry WHERE owner = 'regress_sweep';
SELECT * FROM sweep_counts;

-- a batch of 1,000 stops within the first range, about block 1,000; the next
-- call goes on from there
SELECT idempotency.cleanup(1000);
SELECT * FROM sweep_counts;
SELECT idempotency.cleanup(1000);
SELECT * FROM sweep_counts;

-- VACUUM frees the deleted records' space in the pages swept so far, and new
-- expired records go there, behind the sweep's position
VACUUM idempotency.registry;
INSERT INTO idempotency.registry
       (owner, scope, key, status, attempt, body, created_at, updated_at, expires_at)
SELECT 'regress_sweep', '', ('behind-' || i)::idempotency.key, 'completed',
       (extract(epoch FROM now() - timestamptz '2000-01-01 00:00:00+00') - 60)::int4,
       pg_catalog.convert_to(repeat('x', 1800), 'UTF8'), now(), now(), now() - interval '1 hour'
  FROM generate_series(1, 300) AS i;
SELECT count(*) AS behind_in_swept_pages FROM idempotency.registry
 WHERE key::text LIKE 'behind-%' AND ctid < '(1000,0)'::tid;

-- one call sweeps on to the heap's end, wraps to block 0 and finds them: a
-- call that deletes fewer than its batch size has left nothing expired
SELECT idempotency.cleanup(100000);
SELECT * FROM sweep_counts;
SELECT idempotency.cleanup(100000);

-- records expired within the fencing margin stay, wherever they lie
UPDATE idempotency.registry SET expires_at = now() - interval '1 hour',
       attempt = (extract(epoch FROM now() - timestamptz '2000-01-01 00:00:00+00'))::int4
 WHERE key::text IN ('sweep-1', 'sweep-10000', 'sweep-19999');
SELECT idempotency.cleanup();
SELECT * FROM sweep_counts;

-- an emptied heap: the position past its end counts as block 0
TRUNCATE idempotency.registry;
INSERT INTO idempotency.registry
       (owner, scope, key, status, attempt, created_at, updated_at, expires_at)
VALUES ('regress_sweep', '', 'sweep-again', 'completed',
        (extract(epoch FROM now() - timestamptz '2000-01-01 00:00:00+00') - 60)::int4,
        now(), now(), now() - interval '1 hour');
SELECT idempotency.cleanup();
SELECT * FROM sweep_counts;

TRUNCATE idempotency.registry;
RESET search_path;
