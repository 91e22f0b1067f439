--
-- idempotency.cleanup(): one batch of expired records, in heap order (the
-- registry has no expires_at index: test/regress/sql/sweep.sql tests the sweep);
-- and the cleanup_status view.  The background worker is off in this suite
-- (test/idempotency.conf); test/tap/002_cleanup_worker.pl tests it.
--
SET search_path = public;

SELECT count(idempotency.idempotent_begin(('live-' || i)::idempotency.key, external => true)) FROM generate_series(1, 5) AS i;
SELECT count(idempotency.idempotent_begin(('old-' || i)::idempotency.key, external => true)) FROM generate_series(1, 5) AS i;
UPDATE idempotency.registry SET expires_at = now() - (i || ' minutes')::interval,
       attempt = attempt - 120
  FROM generate_series(1, 5) AS i WHERE key = ('old-' || i)::idempotency.key;

-- a batch of two: any two of the expired records
SELECT idempotency.cleanup(2);
SELECT count(*) AS old_left FROM idempotency.registry WHERE key::text LIKE 'old-%';
SELECT idempotency.cleanup();
SELECT idempotency.cleanup();
SELECT count(*) AS live_left FROM idempotency.registry WHERE key::text LIKE 'live-%';

-- a record whose last attempt was issued less than two seconds ago stays
-- until then even though it expired (abandoned here): once it is gone, the
-- next claim of the key takes its attempt from the clock, which must be past
-- every attempt the record had
SELECT attempt AS fresh_attempt FROM idempotency.idempotent_begin('fresh', external => true) \gset
SELECT idempotency.idempotent_abandon('fresh', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'fresh' AND r.scope = ''));
SELECT idempotency.cleanup();
SELECT status FROM idempotency.registry WHERE key = 'fresh';
UPDATE idempotency.registry SET attempt = attempt - 2 WHERE key = 'fresh';
SELECT idempotency.cleanup();
SELECT count(*) FROM idempotency.registry WHERE key = 'fresh';

-- bad batch sizes
SELECT idempotency.cleanup(0);
SELECT idempotency.cleanup(-1);

-- only administrators may clean, and only pg_monitor may watch
CREATE ROLE regress_cleaner;
CREATE ROLE regress_watcher IN ROLE pg_monitor;
SET ROLE regress_cleaner;
SELECT idempotency.cleanup();
SELECT * FROM idempotency.cleanup_status;
RESET ROLE;
GRANT EXECUTE ON FUNCTION idempotency.cleanup(integer) TO regress_cleaner;
SET ROLE regress_cleaner;
SELECT idempotency.cleanup();
RESET ROLE;
SET ROLE regress_watcher;
SELECT count(*) >= 0 AS can_read FROM idempotency.cleanup_status;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION idempotency.cleanup(integer) FROM regress_cleaner;
DROP ROLE regress_cleaner, regress_watcher;

TRUNCATE idempotency.registry;
RESET search_path;
